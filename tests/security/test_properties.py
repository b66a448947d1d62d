"""Property-based tests (hypothesis) over every parser: arbitrary input never raises, never hangs.

The same targets as the atheris run (tests/security/fuzz_targets.py), fed by hypothesis, plus
text built from secret and marker fragments so the redactor's edge cases are reached quickly.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_skills.safety.redact import redact

from tests.security import fuzz_targets
from tests.security.figures import record

EXAMPLES: Counter[str] = Counter()
"""Examples hypothesis really ran, per test (recorded once the module is done)."""

FRAGMENTS = [line.strip().strip('"') for line in Path(fuzz_targets.__file__).with_name("fuzz.dict").read_text().splitlines()
             if line.startswith('"')]
secretish = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(min_size=0, max_size=40),
                               st.text(alphabet="abcdefABCDEF0123456789+/=_-", min_size=1, max_size=80)),
                     max_size=12).map("".join)
common = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
@common
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise_an_unexpected_exception(target: str, data: bytes) -> None:
    if target == "inspect_checkpoint" and len(data) % 4:  # six file writes per example: sample a quarter
        return
    fuzz_targets.run(target, data)
    EXAMPLES[f"arbitrary bytes: {target}"] += 1


@pytest.fixture(scope="module", autouse=True)
def warm() -> Iterator[None]:
    """First calls load the catalog and compile patterns: done once here, not inside a timed example."""
    for name in fuzz_targets.TARGETS:
        fuzz_targets.run(name, b"step 1 | loss 0.5\nTraceback (most recent call last):\n")
    fuzz_targets.run("safetensors_header", b"\x00{}")  # a valid header: imports the safetensors library and torch
    yield
    for what, n in sorted(EXAMPLES.items()):
        record("hypothesis examples", what, n)


CRASHES = sorted((Path(__file__).parent / "fuzz_crashes").iterdir())


@pytest.mark.parametrize("path", CRASHES, ids=[p.name for p in CRASHES])
def test_inputs_that_once_broke_a_target_stay_fixed(path: Path) -> None:
    """Inputs the fuzzer found (file name: TARGET-what-it-was), kept as regressions."""
    target = next(t for t in fuzz_targets.TARGETS if path.name.startswith(t + "-"))
    fuzz_targets.run(target, path.read_bytes())


@common
@given(text=secretish)
def test_redaction_is_idempotent_on_secret_shaped_text(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    EXAMPLES["redactor idempotent on secret-shaped text"] += 1


@common
@given(text=secretish)
def test_every_parser_accepts_secret_and_marker_shaped_text(text: str) -> None:
    data = text.encode()
    for name in ("scan_text", "parse_line", "parse_traceback", "fence", "read_log"):
        fuzz_targets.run(name, data)
    EXAMPLES["5 parsers on secret- and marker-shaped text"] += 1


@settings(max_examples=30, deadline=5000, derandomize=True)
@given(lines=st.lists(st.text(alphabet="ab \t\u202e\u200b\x1b[0m", max_size=3000), min_size=1, max_size=60),
       pick=st.integers(min_value=0))
def test_a_secret_on_any_line_is_caught_wherever_the_tail_blocks_fall(tmp_path_factory, lines: list[str], pick: int) -> None:
    """The tail reads 64 KiB blocks backwards; lines are cut whole, so a secret on any line of a long log is redacted."""
    from ml_skills.collectors import logfile

    from tests.security.fakes import github

    secret = github()
    i = pick % len(lines)
    lines[i] = lines[i] + " token " + secret
    path = tmp_path_factory.mktemp("tail") / "train.log"
    path.write_text("\n".join("step 1 " * 150 + " " + line for line in lines) + "\n")
    got, _ = logfile.tail(path, len(lines))
    assert len(got) == len(lines)
    assert not any(secret[:12] in redact(g) for g in got)
    EXAMPLES["a secret on any line, wherever the 64 KiB tail blocks fall"] += 1


@settings(max_examples=60, deadline=2000, derandomize=True)
@given(before=st.integers(min_value=1800, max_value=2100))
def test_a_line_cut_for_length_never_shows_half_a_token(before: int) -> None:
    from ml_skills.collectors import logfile

    from tests.security.fakes import github

    secret = github()
    shown = logfile.decode(("a " * (before // 2) + secret + " tail " * 100).encode())
    assert secret[:8] not in shown or secret in shown
    assert secret not in redact(shown)
    EXAMPLES["a line cut for length never shows half a token"] += 1


# JSON built from the shapes that broke the parsers (issue 14): nesting past any parser's stack, integers
# float() cannot hold, offsets of every sign and type, objects where lists belong
DEEP = "@DEEP@"
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                         st.integers(min_value=10**300, max_value=10**400), st.floats(allow_nan=False, allow_infinity=False),
                         st.text(max_size=8), st.just(DEEP))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                           max_leaves=16)
offsets = st.one_of(st.lists(st.integers(min_value=-(2**65), max_value=2**65), min_size=2, max_size=2),
                    st.lists(st.integers(min_value=0, max_value=64), min_size=2, max_size=2).map(sorted), json_values)
tensors = st.fixed_dictionaries({"dtype": st.one_of(st.sampled_from(["F32", "BF16", "F4", "F6_E2M3", "I64", "BOOL", "Q9"]), json_values),
                                 "shape": st.one_of(st.lists(st.integers(min_value=0, max_value=16), max_size=4),
                                                    st.lists(st.integers(min_value=-(2**64), max_value=2**64), max_size=70), json_values),
                                 "data_offsets": offsets})
headers = st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(tensors, json_values), max_size=4)


def _with_deep(text: str, depth: int) -> str:
    return text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)


@common
@given(header=headers, room=st.integers(min_value=0, max_value=40), depth=st.integers(min_value=0, max_value=5000))
def test_any_safetensors_header_gets_a_verdict_and_valid_means_the_library_loads_it(header: dict, room: int, depth: int) -> None:
    """inspect_file answers for any header, within the example's deadline; when it says valid (and knows every
    dtype), the safetensors library reads every tensor (checked inside the fuzz target)."""
    fuzz_targets.safetensors_header(bytes([room]) + _with_deep(json.dumps(header), depth).encode())
    EXAMPLES["safetensors headers from hostile JSON shapes"] += 1


@common
@given(value=json_values, step=json_values, depth=st.integers(min_value=0, max_value=3000), key=st.sampled_from(["loss", "train/loss", "lr"]))
def test_any_json_metric_line_is_parsed_or_refused(value: object, step: object, depth: int, key: str) -> None:
    """parse_line answers for `{"loss": <any JSON>}`, within the example's deadline: floats for the metrics, or None."""
    line = _with_deep(json.dumps({key: value, "step": step}), depth)
    fuzz_targets.parse_line(line.encode())
    EXAMPLES["JSON metric lines from hostile JSON shapes"] += 1
