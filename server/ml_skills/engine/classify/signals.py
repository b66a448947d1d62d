"""A signal: one piece of evidence for a failure class, with the weight classify gives it.

Shared by the classifier, the cascade rules that reweigh signals, and the modules that read the
winning signals back (status, ranks, plan).
"""

from __future__ import annotations

from dataclasses import dataclass

from ml_skills.models import FailureClass, Role, Severity

ROLE_W = {Role.CAUSE: 3.0, Role.SYMPTOM: 1.2, Role.HINT: 0.5}
MIN_PRIMARY = 1.0  # below this weight no class is named
SEV_W = {Severity.CRITICAL: 1.0, Severity.SIGNIFICANT: 0.7, Severity.MINOR: 0.4, Severity.INFO: 0.2}
ANOMALY_W = {Severity.CRITICAL: 3.2, Severity.SIGNIFICANT: 2.0, Severity.MINOR: 0.8, Severity.INFO: 0.3}
TRACEBACK_W = 2.6
SURVIVED = 0.3
WARNING_DAMP = 0.3


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
    inferred: bool = False  # named for an ending the log lost (warninglines.warning_before_a_lost_error): confidence capped
    info: bool = False  # its line was logged at INFO/DEBUG level with no error's words (read/levels.informational)
