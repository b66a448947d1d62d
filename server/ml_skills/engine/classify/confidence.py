"""How often a verdict like this one is right, measured: the confidence of a named class.

A verdict's kind is the evidence it rests on (the primary class's strongest signal):

- exception-named: a traceback's final exception whose own line is a catalog signature (self-describing:
  'CUDA out of memory', 'No space left on device');
- exception-located: a traceback's final exception classified by where it was raised (its frames) or by its
  type and message ('KeyError' inside a dataset's __getitem__);
- signature: a line that names its failure (a NaN loss line, a scheduler's OOM kill, a CUDA error);
- symptom: a line that only says how the run ended or how others saw it (a kill, an exit code, a native abort,
  a collective timeout, a launcher's failure report): it does not name its cause;
- anomaly: a metric trajectory (a NaN onset, a blow-up, a frozen or memorising validation curve);
- stop: only where the log stops (engine/analyse/stops.py).

ACCURACY holds, per kind, the share of such verdicts that were right when the engine met the logs before
being tuned on them: bench/prospective.py re-runs each History batch with the engine that first scored it,
and bench/accuracy.py fits these figures on the dev half of those verdicts and checks them on the held-out
half (docs/accuracy.md, Calibration); a kind's figure is fitted on the verdicts it is applied to, those whose
label is not measured apart in LABEL_ACCURACY. The figure is the verdict's confidence. How close a second class came is
not part of it: the old engines' verdicts do not record it, so its effect could not be measured.
"""

from __future__ import annotations

from functools import cache

from ml_skills.catalog.loader import signatures
from ml_skills.models import Role

KINDS = ("exception-named", "exception-located", "signature", "symptom", "anomaly", "stop")

# Fitted by `python bench/accuracy.py` on the dev half of bench/prospective.json and bench/prospective_healthy.json (see
# its Calibration section): a class named on a healthy run is a wrong verdict of its kind, so a metric anomaly, which
# most false alarms rest on, is measured at what it is worth on runs that did not fail too. tests/engine/test_confidence.py
# fails when these drift from the fit.
ACCURACY: dict[str, float] = {
    "exception-named": 0.83,
    "exception-located": 0.83,
    "signature": 0.93,
    "symptom": 0.9,
    "anomaly": 0.62,
    "stop": 0.5,  # few dev verdicts rest on a stop alone, once a stop at a sync point is measured apart; stops.py caps it at 0.45
}
# Labels measured apart from their kind: a signal label (a signature id, 'traceback:<rule>') that at least LABEL_MIN
# dev verdicts rested on, its accuracy shrunk toward its kind's by PRIOR verdicts, kept where that differs from the
# kind's. A generic native abort is a symptom like a collective timeout but names the wrong cause far more often; an
# exception no rule knows, read as a configuration error, is right about three times in four. The label decides,
# whatever role the signal had in this verdict (the measured verdicts did not record it).
# Fitted with ACCURACY by `python bench/accuracy.py`; tests/engine/test_confidence.py fails when they drift.
LABEL_ACCURACY: dict[str, float] = {
    "abort-native": 0.69,
    "cuda-oom": 0.97,
    "dataloader-worker-exception": 0.97,
    "device-side-assert": 0.91,
    "disk-full": 0.97,
    "import-environment-error": 0.97,
    "job-time-limit": 0.9,
    "loss-blowup": 0.66,
    "loss-value-nan": 0.97,
    "nan-onset": 0.93,
    "nccl-watchdog-timeout": 0.97,
    "oom-killer": 0.97,
    "permission-denied-iam": 0.97,
    "segfault": 0.91,
    "sigkill-exit-137": 0.96,
    "stopped-at-sync-point": 0.35,
    "traceback:checkpoint-call-failed": 0.94,
    "traceback:exception-in-collective": 0.68,
    "traceback:exception-in-data-loading": 0.72,
    "traceback:unclassified-exception": 0.74,
    "traceback:value-or-assert": 0.91,
    "xla-oom": 0.97,
}
LABEL_MIN = 8
MAX_CONFIDENCE = 0.97  # never certain: a fit of 1.00 on a few dozen verdicts says 'no miss seen yet', not 'cannot miss'


@cache
def _signatures() -> dict[str, tuple[Role, bool]]:
    return {s.id: (s.role, s.generic) for s in signatures()}


def evidence_kind(kind: str, label: str, role: Role | None = None) -> str:
    """The kind of a verdict from its strongest signal's kind and label (a signature id, 'traceback:<rule>')."""
    if kind == "stop":
        return "stop"
    if kind in ("anomaly", "source"):
        return "anomaly"
    sid = label.removeprefix("traceback:")
    own, generic = _signatures().get(sid, (None, False))
    if role in (Role.SYMPTOM, Role.HINT) or own in (Role.SYMPTOM, Role.HINT) or generic or sid == "sigkill-external":
        return "symptom"
    if kind == "traceback":
        return "exception-named" if own is not None else "exception-located"
    return "signature"


def label_of(text: str) -> str:
    """The signal label an evidence item's text starts with ('traceback:disk-full: OSError ...' -> 'traceback:disk-full')."""
    if text.startswith("traceback:"):
        return "traceback:" + text[len("traceback:"):].split(":", 1)[0].split(" [", 1)[0]
    return text.split(":", 1)[0].split(" [", 1)[0]


def confidence(kind: str, label: str | None = None) -> float:
    """The measured accuracy of verdicts of this kind, or of this label when it was measured apart."""
    if label is not None and label in LABEL_ACCURACY:
        # a verdict resting on a line that reports a failure and names no cause (a bare SIGKILL, a watchdog timeout) is
        # never surer than one whose line names its failure, whatever its label measured (tests/engine/test_confidence)
        return min(LABEL_ACCURACY[label], ACCURACY["signature"]) if kind == "symptom" else LABEL_ACCURACY[label]
    return ACCURACY.get(kind, min(ACCURACY.values()))
