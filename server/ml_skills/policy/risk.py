"""Map a typed action to its risk level (design.md, "Policy"). Unknown actions are dangerous.

The built-in table itself is vocabulary, kept with ActionKind in models.py (the engine's planner
takes a risk function, and falls back to that table only when no face gives one); a team's policy
file tightens or loosens it per action (policy/rules.py, built on this table).
"""

from __future__ import annotations

from ml_skills.models import DEFAULT_RISK, ActionKind, Risk, builtin_risk

__all__ = ["DEFAULT_RISK", "FLOOR", "ORDER", "below_floor", "risk_of"]

# Levels no policy file can go below: an action that starts a process always asks the person, so a
# client that cannot ask (no elicitation) never starts one.
FLOOR: dict[ActionKind, Risk] = {ActionKind.RESTART_UNCHANGED: Risk.NEEDS_APPROVAL}
ORDER = {Risk.SAFE: 0, Risk.NEEDS_APPROVAL: 1, Risk.DANGEROUS: 2}


def below_floor(kind: str, risk: Risk) -> Risk | None:
    """The floor of `kind` when `risk` is below it, else None."""
    try:
        floor = FLOOR.get(ActionKind(kind))
    except ValueError:
        return None
    return floor if floor is not None and ORDER[risk] < ORDER[floor] else None


risk_of = builtin_risk
