"""A signal: one piece of evidence for a failure class, with the weight classify gives it.

Shared by the classifier, the cascade rules that reweigh signals, and the modules that read the
winning signals back (status, ranks, plan).
"""

from __future__ import annotations

from dataclasses import dataclass

from ml_skills.models import FailureClass, Role

ROLE_W = {Role.CAUSE: 3.0, Role.SYMPTOM: 1.2, Role.HINT: 0.5}
MIN_PRIMARY = 1.0  # below this weight no class is named


@dataclass
class Signal:
    failure_class: FailureClass
    weight: float
    kind: str  # signature, traceback, anomaly, source
    label: str
    source: str
    line_no: int | None
    text: str
    role: Role
    survived: bool = False
    warning: bool = False
