"""The diagnosis engine, one folder per stage in the order of the flow: read/ → analyse/ → classify/ → plan/ (pipeline.py)."""
