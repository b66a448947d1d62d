"""scanpass.metric_point builds a metric point without validating it: on every real log and on the benchmark logs (one
read whole, every loss line; one sampled), each point is equal, field by field and type by type, to the one
validation makes of the same fields, and dumps to the same JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.read import scan, scanpass
from ml_skills.models import MetricPoint

from bench.genlog import generate
from tests import real_logs


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every point scanpass builds from now on is compared with the validated one; returns the sources seen."""
    built = scanpass.metric_point
    seen: list[str] = []

    def checked(**fields: object) -> MetricPoint:
        mp = built(**fields)
        valid = MetricPoint(**fields)  # type: ignore[arg-type]
        assert mp == valid and mp.model_dump_json() == valid.model_dump_json()
        assert {k: type(v) for k, v in mp.__dict__.items()} == {k: type(v) for k, v in valid.__dict__.items()}
        assert mp.model_fields_set == valid.model_fields_set
        seen.append(mp.source)
        return mp

    monkeypatch.setattr(scanpass, "metric_point", checked)
    return seen


def test_every_point_of_the_benchmark_logs_is_the_validated_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _checked(monkeypatch)
    generate(tmp_path / "whole.log", 2**20, seed=6)
    generate(tmp_path / "sampled.log", 3 * 2**20, seed=7)
    for log in (tmp_path / "whole.log", tmp_path / "sampled.log"):
        scan.scan_log(log)
    assert seen.count(str(tmp_path / "whole.log")) > 3000 and seen.count(str(tmp_path / "sampled.log")) >= 40


@pytest.mark.slow
def test_every_point_of_every_real_log_is_the_validated_one(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _checked(monkeypatch)
    for log in real_logs.sample(real_logs.CORPUS_AND_HEALTHY, 4):
        scan.scan_log(log, engine="re" if log.stat().st_size < scan.SMALL_LOG_BYTES else None)
    assert len(set(seen)) > 200


def test_a_point_holds_what_model_construct_would_set() -> None:
    """scanpass.metric_point sets the instance's attributes itself: what model_construct sets for a model with no alias,
    no private attribute, no extra and no post-init hook, which MetricPoint must stay."""
    assert MetricPoint.__pydantic_post_init__ is None and not MetricPoint.__private_attributes__
    assert MetricPoint.model_config.get("extra") != "allow"
    assert all(f.alias is None and f.validation_alias is None for f in MetricPoint.model_fields.values())
    fields: dict = {"source": "a.log", "line_no": 3, "step": 1.0, "epoch": None, "split": "train", "values": {"loss": 1.0},
                    "time": None, "rank": 2, "batch": None, "batches": None}
    mp, ref = scanpass.metric_point(**fields), MetricPoint.model_construct(**fields)
    assert list(mp.__dict__.items()) == list(ref.__dict__.items())  # the same fields, in the same order
    assert (mp.__pydantic_fields_set__, mp.__pydantic_extra__, mp.__pydantic_private__) == \
        (ref.__pydantic_fields_set__, ref.__pydantic_extra__, ref.__pydantic_private__)
    mp.line_no += 5  # a merge shifts line numbers: the fields-set is the point's own
    assert mp.line_no == 8 and ref.line_no == 3
