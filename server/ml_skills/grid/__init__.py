"""triage-runs: many runs through the same engine, grouped by failure fingerprint (design.md, "Scale")."""
