"""Map a typed action to its risk level (design.md, "Policy"). Unknown actions are dangerous.

This is the default rule set; a team's policy file can tighten or loosen it per action
(policy/rules.py, built on this table).
"""

from __future__ import annotations

from ml_skills.models import ActionKind, Risk

DEFAULT_RISK: dict[ActionKind, tuple[Risk, str]] = {
    ActionKind.INSPECT: (Risk.SAFE, "read-only diagnostics and fetching logs or artifacts change nothing"),
    ActionKind.REPOINT_CHECKPOINT: (Risk.SAFE, "re-pointing a resume pointer to an existing, structurally valid checkpoint loses nothing: the old content is kept and the change is undone by writing it back"),
    ActionKind.RESTART_UNCHANGED: (Risk.NEEDS_APPROVAL, "restarting starts a process (possibly distributed workers or a paid job): the person sees the exact recorded command and approves it"),
    ActionKind.CHANGE_HYPERPARAMETER: (Risk.NEEDS_APPROVAL, "hyperparameter changes alter the experiment"),
    ActionKind.CHANGE_CONFIG: (Risk.NEEDS_APPROVAL, "configuration and resource changes alter the experiment or its cost"),
    ActionKind.CHANGE_CODE: (Risk.NEEDS_APPROVAL, "code changes alter what is trained"),
    ActionKind.DATA_FILTER: (Risk.NEEDS_APPROVAL, "data filtering or transforms change what the model learns from"),
    ActionKind.RESUBMIT_PIPELINE: (Risk.NEEDS_APPROVAL, "re-submitting or mutating a pipeline spends money and changes remote state"),
    ActionKind.CANCEL_CLOUD_JOB: (Risk.NEEDS_APPROVAL, "cancelling a long-running cloud job throws away its progress"),
    ActionKind.CHANGE_CLOUD_IAM_QUOTA: (Risk.NEEDS_APPROVAL, "IAM and quota changes alter who can do what and what it costs"),
    ActionKind.KILL_WORKER: (Risk.NEEDS_APPROVAL, "killing a worker ends work in progress"),
    ActionKind.RESTART_DISTRIBUTED: (Risk.NEEDS_APPROVAL, "restarting distributed workers ends work in progress on every rank"),
    ActionKind.ROLLBACK: (Risk.NEEDS_APPROVAL, "rolling back code or checkpoints discards later work"),
    ActionKind.DELETE_CHECKPOINT: (Risk.DANGEROUS, "deleting checkpoints destroys training history"),
    ActionKind.DELETE_RUN: (Risk.DANGEROUS, "deleting runs or model versions destroys history"),
    ActionKind.OVERWRITE_OUTPUT: (Risk.DANGEROUS, "overwriting an output prefix destroys earlier results"),
}


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


def risk_of(kind: ActionKind | str) -> tuple[Risk, str]:
    """Risk of an action kind and the rule that decided it; anything unknown is dangerous."""
    try:
        k = ActionKind(kind)
    except ValueError:
        return Risk.DANGEROUS, f"unknown action '{kind}': unknown actions are dangerous"
    risk, why = DEFAULT_RISK[k]
    return risk, f"{k.value}: {why}"
