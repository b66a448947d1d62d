"""`kubectl describe`'s container state 'State: Terminated' is how a container ended, not a signal from outside.

Real log: corpus 688 (kubeflow/pipelines#10365, a KFP v2 driver pod: 'State: Terminated', 'Reason: Error',
'Message: open /var/run/argo/outputs/parameters/...: no such file or directory', 'Exit Code: 1'). The
killed-by-signal signature's bare 'Terminated' at the end of a line (a shell's job report) read it as the process
being stopped by a signal, a process crash with a resume-from-checkpoint plan, for a step that never started.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def test_a_pod_state_terminated_is_not_a_signal_kill_corpus_688() -> None:
    log = next((TESTS / "corpus").glob("688-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert not any("killed-by-signal" in e.text for e in d.evidence), [e.text for e in d.evidence]
    assert d.primary_cause is None or d.primary_cause.value != "process-crash", d.root_cause
