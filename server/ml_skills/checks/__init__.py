"""Checks before and after a run: preflight (before paying), provenance (before promoting), watch (during)."""
