"""The failure catalog: signatures and fixes as data, loaded once into typed models."""

from ml_skills.catalog.loader import exception_rules, fixes, signatures

__all__ = ["exception_rules", "fixes", "signatures"]
