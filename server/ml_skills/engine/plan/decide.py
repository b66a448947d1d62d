"""GO / NO-GO: GO only when a safe recovery path exists; otherwise a person must decide."""

from __future__ import annotations

from ml_skills.models import ActionKind, Classification, Decision, Fix, Risk

RECOVERY = {ActionKind.REPOINT_CHECKPOINT, ActionKind.RESTART_UNCHANGED}


def decide(cls: Classification, fixes: list[Fix], insufficient: str | None, completed_clean: bool = False) -> tuple[Decision, str]:
    if completed_clean:
        return Decision.GO, ("the run completed with no failure signature, traceback or metric anomaly: nothing to recover; "
                             "before promoting it, check its artifacts (ml-skills verify-artifacts on the run directory)")
    if cls.primary is None or insufficient:
        return Decision.NO_GO, "evidence is insufficient to act on: collect what is named under 'Insufficient evidence' first"
    # a recovery counts only if nothing a person must approve is ranked before it (a full disk
    # must be freed before resuming, or the run fails again at its next save)
    safe_recovery = [f for f in fixes[:3] if f.risk is Risk.SAFE and f.kind in RECOVERY and f.command
                     and all(g.risk is Risk.SAFE for g in fixes[: f.rank - 1])]
    if safe_recovery and cls.confidence >= 0.5:
        f = safe_recovery[0]
        return Decision.GO, f"a safe recovery path exists: fix {f.rank} ({f.kind.value}) changes nothing but where the run resumes"
    top = fixes[0] if fixes else None
    if top is None:
        return Decision.NO_GO, "no recovery action is known for this failure"
    if top.risk is Risk.SAFE:
        return Decision.NO_GO, f"the first step is a safe check ({top.fix_id}), but recovery needs a change a person must approve"
    return Decision.NO_GO, f"the top fix is {top.risk.value} ({top.kind.value}): a person must decide"
