"""Renderers: the only code that writes, and only into --out-dir."""
