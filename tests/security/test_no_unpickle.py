"""Checkpoint inspection never unpickles: a live malicious pickle is reported from its structure, its payload never runs.

The payload is real: loading the file with torch.load(weights_only=False) in a child process
writes the marker file (the control). Our inspection, the CLI and the MCP tool do not.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import torch
from ml_skills.collectors import artifacts, checkpoints

from tests.conftest import run_cli
from tests.mcp.conftest import Server, text
from tests.security.figures import record


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):  # what an attacker's checkpoint does on load
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _evil(run: Path, marker: Path) -> list[Path]:
    run.mkdir(parents=True, exist_ok=True)
    zipped = run / "checkpoint-100.pt"
    torch.save({"step": 100, "model": {"w": torch.zeros(2)}, "x": Payload(marker)}, zipped)
    legacy = run / "pytorch_model-200.bin"
    legacy.write_bytes(pickle.dumps({"x": Payload(marker)}, protocol=2))
    raw = run / "state-300.pkl"
    raw.write_bytes(pickle.dumps(Payload(marker)))
    return [zipped, legacy, raw]


def test_the_payload_is_live_when_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "control-marker"
    (pt, *_rest) = _evil(tmp_path / "run", marker)
    subprocess.run([sys.executable, "-c", f"import torch; torch.load({str(pt)!r}, weights_only=False)"], check=True, timeout=120)
    assert marker.read_text() == "pwned"


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    marker = tmp_path / "MARKER"
    run = tmp_path / "run"
    return run, marker, _evil(run, marker)


def test_inspection_reports_structure_and_never_runs_the_payload(evil: tuple[Path, Path, list[Path]]) -> None:
    run, marker, files = evil
    infos = {p.name: checkpoints.inspect_file(p) for p in files}
    assert infos["checkpoint-100.pt"].format == "torch-zip" and infos["checkpoint-100.pt"].valid
    assert infos["pytorch_model-200.bin"].format == "torch-legacy"
    assert "not done" in infos["pytorch_model-200.bin"].reason  # reported, not unpickled
    inv = artifacts.inventory(run)
    assert len(inv.checkpoints) >= 2
    assert not marker.exists()
    record("hostile inputs", "live malicious pickles (.pt zip, .bin legacy, .pkl) inspected", len(files))


def test_cli_and_mcp_never_run_the_payload(evil: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    run, marker, files = evil
    proc = run_cli("check-failed-run", str(run), "--out-dir", str(tmp_path / "out"))
    assert proc.returncode in (0, 1), proc.stderr
    srv = Server(tmp_path, roots=[tmp_path])

    async def go() -> list[str]:
        async with srv.client() as c:
            got = [text(await c.call_tool("inspect_checkpoint", {"path": str(p)})) for p in files]
            got.append(text(await c.call_tool("list_artifacts", {"path": str(run)})))
            return got

    out = anyio.run(go)
    assert "torch-zip" in out[0]
    assert not marker.exists()
    record("hostile inputs", "live malicious pickles through the CLI and MCP", 2 * len(files))
