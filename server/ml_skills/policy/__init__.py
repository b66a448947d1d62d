"""The policy layer: what may be done about a diagnosis, and who must agree first."""
