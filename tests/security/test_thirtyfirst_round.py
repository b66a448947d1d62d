"""Issue 14's thirty-first round: an outside tester's attacks (a helper session that did not write this code). Each test
drives the server over stdio, the CLI in a child process, or the function the claim is about; each failed on the code
before its fix (docs/security.md, "Thirty-first round")."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from ml_skills.collectors.checkpoints import MAX_SAFETENSORS_HEADER
from ml_skills.errors import PathNotAllowed
from ml_skills.safety import paths

from tests.mcp.conftest import Server, call_once
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

_PLANT = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nraise ImportError('planted')\n"


def test_modules_planted_in_the_servers_working_folder_never_run(tmp_path: Path) -> None:
    """Promise 1: the server started as `python -m ml_skills.mcp_tools.app` from a run folder (its default root) put that
    folder first on the import path, so a json.py, logging.py, psutil.py or yaml.py planted there ran inside the server,
    at start-up or when a tool imported it."""
    outside = tmp_path.parent / f"{tmp_path.name}-marks"
    outside.mkdir()
    names = ("json", "logging", "dataclasses", "psutil", "yaml", "statistics", "gzip")
    for n in names:
        (tmp_path / f"{n}.py").write_text(_PLANT.format(marker=str(outside / n)))
    shutil.copy(next(CORPUS.glob("2070-*")) / "train.log", tmp_path / "train.log")
    srv = Server(tmp_path, roots=[tmp_path])
    err, body, _ = call_once(srv, "check_process", {"pid": os.getpid(), "sample_seconds": 0.5})
    assert "planted" not in body, body
    err, body, _ = call_once(srv, "diagnose", {"target": str(tmp_path / "train.log")})
    assert not err and "oom" in body, body
    assert sorted(p.name for p in outside.iterdir()) == []


def _older_and_pointer(run: Path) -> tuple[Path, Path]:
    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    run.mkdir(parents=True)
    older = run / "model-100.safetensors"
    st.save_file({"w": torch.ones(2)}, str(older))
    return older, run / "latest"


def _stays(srv: Server, pointer: Path, older: Path) -> str:
    before = pointer.read_text()
    _err, body, _ = call_once(srv, "request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(pointer),
                                                              "checkpoint": str(older)}})
    assert pointer.read_text() == before, body
    assert "no-elicitation" in body, body
    return body


def test_a_pointer_on_a_checkpoint_too_big_to_verify_is_never_moved_unasked(tmp_path: Path) -> None:
    """Promise 2: a safetensors file whose header (a 17 MiB __metadata__) is over the inspector's cap, which safetensors
    loads, and a zip checkpoint whose central directory is over 8 MiB, were 'not verified' and so invalid: a pointer on
    either was moved to an older checkpoint as a safe action, asked of no one."""
    st = pytest.importorskip("safetensors.torch")
    torch = pytest.importorskip("torch")
    run = tmp_path / "run"
    older, pointer = _older_and_pointer(run)
    big = run / "model-200.safetensors"
    st.save_file({"w": torch.ones(2) * 2}, str(big), metadata={"notes": "x" * (17 * 2**20)})
    assert st.load_file(str(big))["w"][0] == 2  # it loads
    assert big.stat().st_size > MAX_SAFETENSORS_HEADER  # over the inspector's cap
    srv = Server(tmp_path, roots=[tmp_path])
    err, body, _ = call_once(srv, "inspect_checkpoint", {"path": str(big)})
    assert not err and "not verified" in body, body
    pointer.write_text(f"{big.name}\n")
    _stays(srv, pointer, older)
    wide = run / "model-300.pt"
    with zipfile.ZipFile(wide, "w", zipfile.ZIP_STORED) as z:
        for i in range(36_000):
            z.writestr(f"archive/data/{i:06d}-" + "n" * 220, b"")
    err, body, _ = call_once(srv, "inspect_checkpoint", {"path": str(wide)})
    assert not err and "not verified" in body, body
    pointer.write_text(f"{wide.name}\n")
    _stays(srv, pointer, older)


def test_a_repoint_gives_one_answer_whether_a_target_outside_the_roots_exists_or_not(tmp_path: Path) -> None:
    """Promise 5: the current target of a pointer outside the roots was looked at (lstat): one that exists was a
    rollback that asked, one that did not was a safe action that ran, so the answer told whether the file exists."""
    root = tmp_path / "root"
    older, pointer = _older_and_pointer(root / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "there.pt").write_bytes(b"x" * 64)
    srv = Server(root, roots=[root])
    bodies = []
    for name in ("there.pt", "not-there.pt"):
        pointer.write_text(str(outside / name) + "\n")
        got = json.loads(_stays(srv, pointer, older))
        bodies.append({k: v.replace(got["marker"], "M") if isinstance(v, str) else v  # each answer's own marker
                       for k, v in got.items() if k not in ("approval_id", "undo", "manual", "marker")})
    assert bodies[0] == bodies[1] and bodies[0]["outcome"] == "no-elicitation", bodies


def test_an_out_dir_is_made_level_by_level_from_a_held_folder_never_through_a_link(tmp_path: Path) -> None:
    """Promise 1: a caller's out dir was checked, then made by path (mkdir -p), so a folder swapped for a link between
    the two made folders outside the roots, named by the caller (16 of 150 racing calls); the server's own --out-dir was
    made by path before its refusal ('nothing was written'), through a parent turned into a link after start-up."""
    from ml_skills.mcp_tools.diagnose import _held_out_dir

    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "race").symlink_to(outside, target_is_directory=True)  # the swap, done before the call: the race's outcome
    with paths.within([root]):
        with pytest.raises(PathNotAllowed):
            _held_out_dir(root / "race" / "n1" / "sub", confined=True)
        with pytest.raises(PathNotAllowed):
            _held_out_dir(root / "race" / "out", confined=False)  # the server's own, resolved at start-up
        fd = _held_out_dir(root / "fine" / "n1" / "sub", confined=True)  # the control: made and held
        os.close(fd)
    assert list(outside.iterdir()) == []
    assert (root / "fine" / "n1" / "sub").is_dir()


def test_a_hostile_yaml_grid_is_a_clear_error_never_an_internal_one(tmp_path: Path) -> None:
    """Promise 9: a triage grid whose cell is a 5,000-digit integer (PyYAML's int() over Python's digit limit) or the
    date 2024-13-45 (date() out of range) raised ValueError: 'internal error', exit 3."""
    run = tmp_path / "runs" / "run1"
    run.mkdir(parents=True)
    shutil.copy(next(CORPUS.glob("2070-*")) / "train.log", run / "train.log")
    (tmp_path / "digits.yaml").write_text("- " + "7" * 5000 + "\n")
    (tmp_path / "date.yaml").write_text("- 2024-13-45\n- run1\n")
    for grid in ("digits.yaml", "date.yaml"):
        got = cli("triage-runs", str(tmp_path / "runs"), "--expect", str(tmp_path / grid), cwd=tmp_path, timeout=120)
        assert "internal error" not in got.stderr and "Traceback" not in got.stderr, got.stderr[-600:]
        assert got.returncode != 3, got.stderr[-600:]
    assert "not a cell name" in cli("triage-runs", str(tmp_path / "runs"), "--expect", str(tmp_path / "digits.yaml"),
                                    cwd=tmp_path, timeout=120).stderr

