"""The installed version of boundlog."""

__version__ = "0.1.0"
