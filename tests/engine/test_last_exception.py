"""The last exception at the end of a log is the terminal event, whatever its type (issue 13, behaviour 1).

Real logs: corpus 517 (an 11-hour LSF run whose end-of-run profiling report reads an empty cProfile file:
pstats -> marshal.load -> EOFError), corpus 450 (a NameError in model code whose module path holds
'torch_geometric', which the evaluation rule's 'metric' used to match inside the word). Real runs: a child
process that pickles its state, finds the file empty when reading it back, and one whose code raises an
exception type no rule names.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _case(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*")) / "train.log"


def _run(tmp_path: Path, script: str) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    return log


def test_an_eoferror_reading_back_a_saved_file_is_an_output_failure_corpus_517():
    d = diagnose(DiagnoseRequest(target=str(_case("517"))))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert "EOFError" in d.root_cause.proximate
    assert d.run_status.value == "crashed"


def test_metric_inside_another_word_is_not_an_evaluation_frame_corpus_450():
    d = diagnose(DiagnoseRequest(target=str(_case("450"))))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "NameError" in d.root_cause.proximate
    # named from where the run ended, not from a rule that knows its type: a symptom's confidence
    assert d.primary_cause_confidence < 0.95


TRUNCATED_STATE = """
    import pickle
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(16, 4)
        loss = model(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    open("replay.pkl", "wb").close()  # the writer was killed before it flushed

    def load_replay(path):
        with open(path, "rb") as f:
            return pickle.load(f)

    buffer = load_replay("replay.pkl")
"""


def test_a_real_run_reading_back_an_empty_pickle_is_io_checkpoint(tmp_path):
    log = _run(tmp_path, TRUNCATED_STATE)
    assert "EOFError" in log.read_text(), log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause
    assert d.run_status.value == "crashed"


UNKNOWN_TYPE = """
    import torch
    class RewardShapeError(Exception):
        pass
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    for step in range(2):
        print(f"step {step} loss {model(torch.randn(8, 4)).pow(2).mean().item():.4f}", flush=True)
    raise RewardShapeError("reward has 3 entries for 4 agents")
"""


def test_a_real_run_ending_in_an_exception_no_rule_knows_is_never_dropped(tmp_path):
    log = _run(tmp_path, UNKNOWN_TYPE)
    assert "RewardShapeError" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "RewardShapeError" in d.root_cause.proximate
    assert d.primary_cause_confidence < 0.95
    assert d.run_status.value == "crashed"
