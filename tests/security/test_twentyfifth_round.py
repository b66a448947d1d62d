"""Issue 14's twenty-fifth round: attacks from outside on the code new since the twenty-fourth (a resume that started over
from scratch, predictions that no longer change, a learning rate under 1e-10, 'Updating learning rate to X', zero-padded
NaN, 'completed or interrupted', INFO-level symptoms, batch 34's signatures, the cache), and on the engine's patterns with a
fuzzer whose fillers pair a letter with a separator ('a-', 'a/', 'a.'): a key-value metric line over a run of 'a-', a tail
line over a run of path segments.

Each test is one family of attacks that broke a claim of docs/security.md, driven through the CLI in a child process with
real files; each failed on the code before its fix (see docs/security.md, "Twenty-fifth round").
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.security.childcli import cli_seconds, no_slower_than

pytestmark = pytest.mark.slow  # real child processes


def _log(tmp_path: Path, name: str, text: str) -> Path:
    log = tmp_path / name / "train.log"
    log.parent.mkdir()
    log.write_text(text)
    return log


def test_a_key_value_metric_line_over_a_run_of_dashed_words_never_slows_the_cli(tmp_path: Path) -> None:
    """Promise 9: time linear in the input. Every metric line is read for its `key: value` pairs by metric_formats._PAIR,
    which starts a pair after a separator ('-' among them, Keras' '- loss: 0.2') and reads a key of letters, digits, '.', '/'
    and '-'. '-' both starts a pair and is part of a key, so on 'loss: 0.5 a-a-a-...!' every '-' read the run to its end and
    back: 0.4 s for a line of 4,000 characters, and as each line of another length has a shape of its own (the parse's memo
    does not help), thirty such lines held the CLI 12.5 s (its control 1.6 s). A pair is now tried only from the starts that
    can match (metric_formats.pair_matches): the same spans and groups as _PAIR.finditer on random strings."""
    from ml_skills.engine.read import metric_formats

    log = _log(tmp_path, "run", "".join("loss: 0.5 " + "a-" * (1900 + i) + "!\n" for i in range(30)))
    control = _log(tmp_path, "control", "".join("loss: 0.5 " + "ab" * (1900 + i) + "!\n" for i in range(30)))
    _, base = cli_seconds(control, tmp_path)
    proc, took = cli_seconds(log, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["run_status"]
    assert no_slower_than(took, base), (took, base)
    rng = random.Random(25)
    alphabet = ["a", "_", "-", "-", " ", ":", "=", "1", "0.5", "'", '"', ".", "/", "(", "[", "{", "|", ",", ";", "loss", "nan",
                "e-3", "\t", "\xa0", "é", " (ms)", "tensor(", ":: ", "%"]
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        want = [(m.span(), m.span("key"), m.span("val")) for m in metric_formats._PAIR.finditer(s)]
        assert [(m.span(), m.span("key"), m.span("val")) for m in metric_formats.pair_matches(s)] == want, repr(s)


def test_tail_lines_of_path_segments_never_slow_the_cli(tmp_path: Path) -> None:
    """Promise 9: time linear in the input. The log's tail lines are searched for a file the log names as holding the
    error's own output (plan/commands._POINTER: 'see .../error.txt', an error file's path '/.../error.txt'): '/' and '.'
    both start an error file's path and are part of one, and 'see' or 'check' inside a path both start a pointer and are
    part of its path, so on '/a/a/a/...' every '/' read the path to its end and back: 30 ms for a tail line of 2,000
    characters (the most a tail line shows), and 300 of them held the CLI 11.1 s (its control 1.7 s). The line is now
    searched only from the starts that can match (commands.pointers): the same spans and groups as _POINTER.finditer on
    random strings."""
    from ml_skills.engine.plan import commands

    shapes = ["/a" * 995, "/see" * 497, "../" * 663]
    error = "RuntimeError: the run failed\n"
    log = _log(tmp_path, "run", "step 1 loss: 0.5\n" + "".join(shapes[i % 3][: 1985 + i % 7] + ".txt_\n" for i in range(300)) + error)
    control = _log(tmp_path, "control", "step 1 loss: 0.5\n" + "".join(re.sub("[/.]", " ", shapes[i % 3][: 1985 + i % 7]) + ".txt_\n"
                                                                       for i in range(300)) + error)
    _, base = cli_seconds(control, tmp_path)
    proc, took = cli_seconds(log, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["run_status"] == "crashed"
    assert no_slower_than(took, base), (took, base)
    rng = random.Random(25)
    alphabet = ["a", "/", "/", ".", ".", "~", "-", "=", ":", " ", "'", '"', "see", "check", "failures", "error", "error_file",
                "error file", "log is in ", "details in", "written to", "see also", ".txt", ".log", ".json", ".TXT", "\u017f",
                "_", "@", "\t", "error.txt", "/error", ".."]
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        want = [(m.span(), m.span("path"), m.span("error")) for m in commands._POINTER.finditer(s)]
        assert [(m.span(), m.span("path"), m.span("error")) for m in commands.pointers(s)] == want, repr(s)


def test_tail_lines_of_comma_separated_digits_beside_a_perfect_validation_never_slow_the_cli(tmp_path: Path) -> None:
    """Promise 9: time linear in the input. A perfect validation score at the first evaluation is read beside the validation
    set's size the run states ('[VAL] Loaded 16 images', analyse/valsize._COUNT on the head and tail lines that name
    validation), whose count of digits and commas ('1,024') starts at each digit after a comma: on 'val 0,0,0,...' every
    digit read the run to its end and back, 30 ms for a tail line of 2,000 characters, and 300 such lines held the CLI 9 s
    (its control 0.8 s). The size is now searched only from the starts that can match (valsize.count): the same spans and
    groups as _COUNT.search on random strings."""
    from ml_skills.engine.analyse import valsize

    head = "".join(f"epoch {i} loss: {1 / (i + 1):.3f} val_acc: 1.0\n" for i in range(10))
    log = _log(tmp_path, "run", head + "".join("val " + ("0," * 995)[: 1990 - i % 5] + " x\n" for i in range(300)))
    control = _log(tmp_path, "control", head + "".join("val " + ("0 " * 995)[: 1990 - i % 5] + " x\n" for i in range(300)))
    _, base = cli_seconds(control, tmp_path)
    proc, took = cli_seconds(log, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["run_status"] == "degraded"
    assert no_slower_than(took, base), (took, base)
    rng = random.Random(25)
    alphabet = ["0", "1", "9", ",", ",", " ", "\t", "a", "_", "images", " images", "samples", "Size", "size", "len", "length",
                ")", ":", "=", "\u017fize", "\u0663", "\u00b2", "val", ".", "IMAGES", "clips"]
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        want, got = valsize._COUNT.search(s), valsize.count(s)
        assert (got and (got.span(), got.span(1), got.span(2))) == (want and (want.span(), want.span(1), want.span(2))), repr(s)
