"""Hydra's instantiate() error without HYDRA_FULL_ERROR, read from the real corpus logs that print it.

Hydra prints no traceback then, only "Error in call to target '<target>':" and the exception's repr
on the next line; the target is the only frame there is, and it says where the failure was raised.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.tracebacks import parse_at

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _log(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*")) / "train.log"


def _report(prefix: str) -> tuple[int, list[str]]:
    lines = _log(prefix).read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("Error in call to target"))
    return i + 1, lines[i:]


def test_a_dataset_target_failing_is_parsed_with_its_exception_and_the_target_as_frame():
    line_no, lines = _report("339")
    ev = parse_at(lines, line_no, "train.log")
    assert ev is not None
    assert ev.exc_type == "ValueError" and ev.line_no == line_no
    assert ev.message.startswith("Directory features_subdir='log_mel_16k' does not exist")
    assert ev.frames == ["autrainer/datasets/speech_commands.py:SpeechCommands"]
    d = diagnose(DiagnoseRequest(target=str(_log("339"))))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline"


def test_a_function_target_called_with_a_wrong_keyword_stays_a_config_error():
    line_no, lines = _report("155")
    ev = parse_at(lines, line_no, "train.log")
    assert ev is not None and ev.exc_type == "TypeError"
    assert "got an unexpected keyword argument 'model_type'" in ev.message
    d = diagnose(DiagnoseRequest(target=str(_log("155"))))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"


def test_the_report_line_without_an_exception_repr_after_it_is_not_a_traceback():
    line_no, lines = _report("339")
    assert parse_at([lines[0], "Set the environment variable HYDRA_FULL_ERROR=1"], line_no, "train.log") is None
