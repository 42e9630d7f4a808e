"""The embedded local cloud (the default plugin)."""

from .cloud import LocalCloud

__all__ = ["LocalCloud"]
