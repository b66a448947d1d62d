"""Classify: weigh every signal, pick the primary failure class, its confidence and run status."""
