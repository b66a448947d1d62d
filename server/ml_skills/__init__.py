"""ml-skills: diagnose failed or unstable ML training runs from their evidence."""

__version__ = "0.1.0"
