"""Ends of runs the engine read as still running, from batch 21's healthy logs (verbatim public logs; each case.json
cites its file): the last ETA of an mmdet/mmengine run smaller than it fell by since the line before, followed by the
final save and evaluation; DeepXDE's timer on its whole training call. Controls: the same kind of run cut before its
wrap-up (healthy 276, and 518 cut at its last ETA line) stays running."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

HEALTHY = Path(__file__).resolve().parents[1] / "healthy"


def _status(log: Path) -> str:
    return diagnose(DiagnoseRequest(target=str(log))).run_status.value


def _case(n: str) -> Path:
    return next(HEALTHY.glob(f"{n}-*")) / "train.log"


def test_the_last_eta_inside_the_last_interval_then_the_final_save_is_the_end():
    # 518: 'eta: 0:00:54' at iteration 200 of 271, 'eta: 0:00:16' at 250, 'Saving checkpoint at 40 epochs', COCO table
    assert _status(_case("518")) == "completed"
    # 517: the last ETA is 0:00:00, but mmengine's 'Epoch(val)' line after the save is the last progress line
    assert _status(_case("517")) == "completed"


def test_a_run_cut_inside_its_last_interval_is_still_running(tmp_path: Path):
    # 276: 'eta: 0:00:16' at iteration 900 of 938 of the last epoch, then only the experiment's name: no save yet
    assert _status(_case("276")) in {"running", "unknown"}
    lines = _case("518").read_text(encoding="utf-8").splitlines(keepends=True)
    last_eta = max(i for i, x in enumerate(lines) if "eta: " in x)
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[: last_eta + 1]), encoding="utf-8")  # a slice of the real file, ending at that line
    assert _status(cut) in {"running", "unknown"}


def test_deepxde_timing_its_whole_training_call_is_a_summary_of_the_run():
    # 531: "'train' took 1178.429103 s", then the saved histories, 'Mean residual', 'L2 relative error: 0.16' (a metric)
    assert _status(_case("531")) == "completed"
