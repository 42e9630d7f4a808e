"""A BOSH external CPI: one JSON request in, one JSON response out, per process."""

__version__ = "0.1.0"
