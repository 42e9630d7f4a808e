"""The aws cloud plugin. Importing it loads no AWS SDK (see cloud.py and session.py)."""

from .cloud import AwsCloud

__all__ = ["AwsCloud"]
