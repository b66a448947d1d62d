"""The exact largest grad norm of sampled logs: the threshold patterns and the per-chunk record."""

from __future__ import annotations

import math
import random
import re
from fractions import Fraction

import pytest
from ml_skills.engine.read import gradmax, matcher, scan
from ml_skills.models import AnomalyKind

ENGINES = ["re"] + (["hyperscan"] if matcher._hs is not None else [])
LEVELS = [(0, 1, 0), (0, 1, 5), (0, 4, 7), (0, 9, 9), (1, 1, 0), (1, 4, 7), (2, 3, 0), (3, 1, 5), (7, 2, 0), (8, 9, 9)]
KEYS = ["grad_norm=", "'grad_norm': ", "grad norm: ", "total_norm = ", '"grad_norm": ', "grad_norm: tensor(", "gnorm: ", "Gradient Norm = "]


def _formats(v: float, rng: random.Random) -> str:
    m, e = f"{v:e}".split("e")
    unnormalised = rng.choice([f"{float(m) * 10:.3f}e{int(e) - 1}", f"{float(m) / 10:.4f}e{int(e) + 1:+03d}", f"{int(float(m) * 100)}E{int(e) - 2:+d}"])
    return rng.choice([repr(v), f"{v:.4f}", f"{v:.3e}", f"{v:.2E}".replace("E+", "E"), f"{v:g}", f"{v:.3g}", f"{v:08.3f}",
                       str(int(v)), f"{v:E}", unnormalised])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("loose", [False, True])
def test_threshold_reports_every_value_at_or_above_its_level(engine, level, loose):
    """No value >= the level may be missed (a miss could hide the spike); a few smaller ones may be reported."""
    rng = random.Random(hash(level) & 0xFFFF)
    m = gradmax._matcher(level, engine, loose)
    key = gradmax.LOOSE_KEY if loose else gradmax.KEY
    gated = [(matcher.Matcher([p], engine=engine), matcher.Matcher([g], engine=engine)) for p, g in gradmax.at_least(level, key) if g]
    k, d1, d2 = level
    t = Fraction(d1 * 10 + d2) * Fraction(10) ** (k - 1)
    assert gradmax.level_value(level) == pytest.approx(float(t))
    spurious = 0
    for _ in range(1500):
        v = 10 ** rng.uniform(-3, 10) if rng.random() < 0.8 else float(t) * rng.choice([1, 1.001, 0.999, 1.1, 0.9])
        text = _formats(v, rng)
        line = f"step=3 loss=2.01 {rng.choice(KEYS)}{text}{rng.choice([' lr=1e-4', ',', '', ' |', ')', '}'])}\n".encode()
        hit = bool(m.find(line))
        for pattern, gate in gated:  # a gated pattern is scanned only where its gate fired: the gate must be implied
            assert not pattern.find(line) or gate.find(line), f"{line!r} matches a gated pattern but not its gate"
        at_or_above = Fraction(text) >= t
        assert hit or not at_or_above, f"missed {line!r} at level {level}"
        spurious += hit and not at_or_above and not re.match(r"(0|[1-9]\d+)(\.\d*)?[eE]", text)  # unnormalised: reported by design
    assert spurious < 30  # reports below the level cost time only; they must stay rare


@pytest.mark.parametrize("v", [1.0, 1.04, 1.1, 4.7, 9.99, 10.0, 47.25, 99.9, 100.0, 123456.0, 2.5e9, 0.3, float("nan"), float("inf")])
def test_level_never_exceeds_the_value(v):
    level = gradmax.level_at_most(v)
    assert level == (0, 1, 0) if math.isnan(v) else gradmax.level_value(level) <= max(v, gradmax.FLOOR)
    assert gradmax.level_value(level) >= gradmax.FLOOR


@pytest.mark.parametrize("engine", ENGINES)
def test_record_rises_to_the_first_occurrence_of_the_chunk_maximum(engine):
    lines = [f"step={i} loss=2.0 grad_norm={0.9 + (i % 5) * 0.01:.3f}" for i in range(2000)]
    lines[700] = "step=700 loss=2.0 grad_norm=3.5e+02"
    lines[1500] = "step=1500 loss=2.0 grad_norm=350.0"  # a tie: the earlier line stays the record
    chunk = ("\n".join(lines) + "\n").encode()
    rec = gradmax.scan_chunk(chunk, 1000, gradmax.Record(value=0.94, offset=1000 + 5), engine)
    assert rec is not None and rec.value == 350.0 and rec.raw == lines[700].encode()
    assert rec.offset == 1000 + chunk.index(lines[700].encode())
    assert gradmax.scan_chunk(chunk, 1000, gradmax.Record(value=400.0, offset=0), engine).value == 400.0


@pytest.mark.parametrize("engine", ENGINES)
def test_many_values_above_the_record_are_narrowed_not_dropped(engine):
    """A chunk where the grad norm climbs all the way: more reports than the cap, the maximum still exact."""
    lines = [f"it {i} | loss 1.5 | grad_norm: {1.0 + i * 0.01:.2f}" for i in range(5000)]
    lines[2222] = "it 2222 | loss 1.5 | grad_norm: 9999.5"
    chunk = ("\n".join(lines) + "\n").encode()
    rec = gradmax.scan_chunk(chunk, 0, None, engine)
    assert rec is not None and rec.value == 9999.5 and rec.raw == lines[2222].encode()


@pytest.mark.parametrize("engine", ENGINES)
def test_other_norms_on_every_line_do_not_hide_the_grad_norm_maximum(engine):
    """Megatron with --log-params-norm writes 'params norm: 250.3' on every iteration line: the loose
    key reports all of them, so the chunk is read again with the grad-norm keys; the maximum stays exact."""
    lines = [f" iteration {i:8d}/ 100000 | lm loss: 5.1E+00 | grad norm: {0.9 + (i % 5) * 0.01:.3f} | params norm: {250 + i * 0.001:.3f} |"
             for i in range(3000)]
    lines[1234] = lines[1234].replace("grad norm: 0.940", "grad norm: 7.125")
    chunk = ("\n".join(lines) + "\n").encode()
    rec = gradmax.scan_chunk(chunk, 0, gradmax.Record(value=0.95, offset=0), engine)
    assert rec is not None and rec.value == 7.125 and rec.raw == lines[1234].encode()


def test_spike_in_exponent_form_after_an_early_high_value(tmp_path):
    """A high value in the first chunk (reported before any sample) must not hide the later, larger spike."""
    path = tmp_path / "gn.log"
    lines = [f"step={i} loss={2.0 - i * 1e-6:.6f} grad_norm={0.8 + (i % 7) * 0.01:.3f} lr=1.0e-04" for i in range(1, 400_001)]
    lines[3] = "step=4 loss=1.999996 grad_norm=12.5 lr=1.0e-04"
    lines[300_001] = "step=300002 loss=1.699998 grad_norm=6.25e+02 lr=1.0e-04"
    path.write_text("\n".join(lines) + "\n")
    ev = scan.scan_log(path)
    assert any("metrics sampled" in p for p in ev.problems)
    spike = next(a for a in ev.trajectory.anomalies if a.kind is AnomalyKind.GRAD_SPIKE)
    assert spike.line_no == 300_002 and spike.step == 300_002
    assert "625" in spike.detail


@pytest.mark.parametrize("engine", ENGINES)
def test_a_grad_norm_too_long_for_a_float_is_the_top_level(engine):
    """'grad_norm=1e999' reads as inf: the record takes it without overflowing, and the next chunk scans above it."""
    chunk = b"step=1 loss=2.0 grad_norm=0.9\nstep=2 loss=2.0 grad_norm=1e999\n"
    rec = gradmax.scan_chunk(chunk, 0, None, engine)
    assert rec is not None and rec.value == float("inf")
    assert gradmax.scan_chunk(b"step=3 loss=2.0 grad_norm=5.0e8\n", len(chunk), rec, engine) is rec


def test_sampled_log_that_goes_to_inf_keeps_the_largest_finite_norm(tmp_path):
    """A long run whose grad norm becomes inf at its end (the NaN onset): the spike compared is the
    largest finite norm, and the diagnosis does not fail on the inf."""
    path = tmp_path / "inf.log"
    lines = [f"step={i} loss={2.0 - i * 1e-6:.6f} grad_norm={0.8 + (i % 7) * 0.01:.3f} lr=1.0e-04" for i in range(1, 400_001)]
    lines[350_000] = "step=350001 loss=1.65 grad_norm=4.5e+04 lr=1.0e-04"
    lines[-1] = "step=400000 loss=inf grad_norm=inf lr=1.0e-04"
    path.write_text("\n".join(lines) + "\n")
    ev = scan.scan_log(path)
    assert any("metrics sampled" in p for p in ev.problems)
    assert ev.trajectory.first_nan_line == 400_000
    spike = next(a for a in ev.trajectory.anomalies if a.kind is AnomalyKind.GRAD_SPIKE)
    assert spike.line_no == 350_001 and "4.5e+04" in spike.detail
