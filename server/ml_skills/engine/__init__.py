"""The diagnosis engine: scan → trajectories → classify → plan → decide (pipeline.py)."""
