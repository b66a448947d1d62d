"""Read a log in one streaming pass: signatures, tracebacks, metric lines, frameworks, excerpts."""
