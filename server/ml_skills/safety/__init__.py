"""Handling of untrusted input: secret redaction, quoting of log text, path confinement."""
