"""The numstd version (PEP 440)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
