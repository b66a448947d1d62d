"""Collectors: the only code that touches the outside world. None of them writes anything."""

import os

from ml_skills.errors import InputError


def env_seconds(name: str, default: float, *, high: float = 86_400.0) -> float:
    """A duration setting from the environment, or a one-line error naming the variable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"{name}={raw!r} is not a number of seconds") from None
    if not 0 < value <= high:
        raise InputError(f"{name}={raw!r} must be more than 0 and at most {high:g} seconds")
    return value
