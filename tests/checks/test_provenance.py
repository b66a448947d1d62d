"""verify-artifacts on real artifact directories: a model really trained and saved, then broken
in the ways promotions really go wrong."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ..conftest import ROOT, run_cli


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def make_version(base: Path, run_id: str, previous: Path | None) -> Path:
    """Train a tiny classifier for real, evaluate it on a held-out split, and save the contract."""
    d = base / "models" / run_id
    d.mkdir(parents=True)
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(50):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[:200]), y[:200]).backward()
        opt.step()
    acc = (model(x[200:]).argmax(1) == y[200:]).float().mean().item()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, d / "model.safetensors")
    (d / "labels.json").write_text(json.dumps({"0": "negative", "1": "positive"}))
    (d / "metrics.json").write_text(json.dumps({"heldout_accuracy": acc, "heldout_samples": 56}))
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=False).stdout
    (d / "requirements.txt").write_text(freeze)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip() or "unknown"
    manifest = {
        "run_id": run_id, "git_commit": commit, "data_snapshot": hashlib.sha256(x.numpy().tobytes()).hexdigest(),
        "environment": f"python {sys.version.split()[0]}, torch {torch.__version__}", "shape": {"input": [8], "output": [2]},
        "timestamp": "2026-11-29T12:00:00Z", "previous_version": str(previous) if previous else None,
        "files": {n: _sha(d / n) for n in ("model.safetensors", "labels.json", "metrics.json", "requirements.txt")},
    }
    (d / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return d


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    base = tmp_path_factory.mktemp("pristine")
    v1 = make_version(base, "run-001", None)
    make_version(base, "run-002", v1)
    return base


@pytest.fixture
def versions(pristine, tmp_path):
    """A fresh copy per test; the manifest's previous_version is re-pointed at the copy."""
    shutil.copytree(pristine / "models", tmp_path / "models")
    v1, v2 = tmp_path / "models" / "run-001", tmp_path / "models" / "run-002"
    m = json.loads((v2 / "manifest.json").read_text())
    m["previous_version"] = str(v1)
    (v2 / "manifest.json").write_text(json.dumps(m, indent=1))
    return v1, v2


def verdicts(report: dict) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in report["checks"]}


def test_complete_version_is_go(versions, tmp_path):
    _, v2 = versions
    proc = run_cli("verify-artifacts", str(v2), "--out-dir", str(tmp_path / "o"), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["decision"] == "GO" and set(verdicts(report).values()) == {"pass"}
    assert (tmp_path / "o" / "verify-artifacts.json").exists()


def test_first_version_skips_rollback_only_when_asked(versions, tmp_path):
    v1, _ = versions
    assert run_cli("verify-artifacts", str(v1), "--out-dir", str(tmp_path)).returncode == 1
    proc = run_cli("verify-artifacts", str(v1), "--first-version", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize(
    "breakage, failing",
    [
        (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:-40]), {"weights", "manifest"}),
        (lambda d: (d / "labels.json").unlink(), {"preprocessing", "manifest"}),
        (lambda d: (d / "metrics.json").write_text('{"heldout_accuracy": NaN}'), {"held-out metrics", "manifest"}),
        (lambda d: (d / "requirements.txt").unlink(), {"environment", "manifest"}),
        (lambda d: (d / "manifest.json").write_text(json.dumps({"run_id": "run-002"})), {"manifest", "rollback"}),
        (lambda d: shutil.rmtree(d.parent / "run-001"), {"rollback"}),
    ],
    ids=["truncated-weights", "no-label-encoder", "nan-metric", "no-environment", "thin-manifest", "previous-deleted"],
)
def test_broken_versions_fail_closed(versions, tmp_path, breakage, failing):
    _, v2 = versions
    breakage(v2)
    proc = run_cli("verify-artifacts", str(v2), "--out-dir", str(tmp_path / "o"), "--format", "json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["decision"] == "NO-GO"
    bad = {n for n, v in verdicts(report).items() if v != "pass"}
    assert failing <= bad, report


def test_not_run_scoped(versions, tmp_path):
    _, v2 = versions
    moved = tmp_path / "latest"
    shutil.copytree(v2, moved)
    report = json.loads(run_cli("verify-artifacts", str(moved), "--format", "json", "--out-dir", str(tmp_path / "o")).stdout)
    assert verdicts(report)["run-scoped prefix"] == "fail"


def test_missing_directory_is_one_line(tmp_path):
    proc = run_cli("verify-artifacts", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "no directory" in proc.stderr and "Traceback" not in proc.stderr
