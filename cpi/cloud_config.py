"""Moved: the checking of a cloud-config is cpi.operator.cloud_config, and the shapes a
cloud's online check speaks are cpi.clouds.findings. This name stays only because
cpi/clouds/local/inspect.py still imports `Finding` from here; delete it once that import
says cpi.clouds.findings."""

from cpi.clouds.findings import Finding, Item

__all__ = ["Finding", "Item"]
