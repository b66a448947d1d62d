"""Issue 14's twenty-ninth round: an outside tester's attacks (a helper session that did not write this code, 22 attacks,
7 broke a claim). Each test drives the server over stdio, the CLI in a child process, or the function the claim is about,
with the tester's input shapes; each failed on the code before its fix (docs/security.md, "Twenty-ninth round")."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text
from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes


def _safetensors(path: Path, names: tuple[str, ...] = ("w",)) -> None:
    header = json.dumps({n: {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]} for i, n in enumerate(names)}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8 * len(names))


def _call(srv: Server, tool: str, args: dict[str, object]) -> tuple[bool, str]:
    got: list[tuple[bool, str]] = []

    async def go() -> None:
        async with srv.client() as c:  # a client that cannot ask the person
            res = await c.call_tool(tool, args)
            got.append((bool(res.is_error), text(res)))

    anyio.run(go)
    return got[0]


@pytest.mark.parametrize("name", ["model-200.npz", "model-300.keras"])
def test_a_pointer_on_a_valid_npz_or_keras_checkpoint_is_never_moved_off_it_unasked(tmp_path: Path, name: str) -> None:
    """Promise 2: moving a pointer off a valid checkpoint is a rollback and asks. A zip without data.pkl inspected invalid
    ('not a torch.save file') whatever its suffix, so a pointer on NumPy's savez file or a Keras 3 .keras archive was
    moved to an older checkpoint as a safe action, asked of no one."""
    import numpy as np

    run = tmp_path / "run"
    _safetensors(run / "model-100.safetensors")
    if name.endswith(".npz"):
        np.savez(run / name, w=np.zeros(4, "f4"), b=np.ones(2, "f4"))
    else:  # Keras 3's layout: config.json, metadata.json and the weights in HDF5
        h5py = pytest.importorskip("h5py")
        with h5py.File(tmp_path / "w.h5", "w") as f:
            f["dense/kernel"] = np.zeros((4, 2), "f4")
        with zipfile.ZipFile(run / name, "w") as z:
            z.writestr("config.json", json.dumps({"class_name": "Sequential"}))
            z.writestr("metadata.json", json.dumps({"keras_version": "3.4.1"}))
            z.write(tmp_path / "w.h5", "model.weights.h5")
    (run / "latest").write_text(name + "\n")
    srv = Server(tmp_path)
    err, body = _call(srv, "inspect_checkpoint", {"path": str(run / name)})
    assert not err and '"valid":true' in body.replace(" ", ""), body
    err, body = _call(srv, "request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"),
                                                          "checkpoint": str(run / "model-100.safetensors")}})
    assert (run / "latest").read_text() == name + "\n", body
    assert "no-elicitation" in body and "rollback" in body, body


def test_a_wandb_link_out_of_the_roots_lists_no_outside_run_names(tmp_path: Path) -> None:
    """Promise 5: no name outside the roots is given back. `proj/wandb` linking to a folder outside made the 'no W&B run'
    error list that folder's run-* names (and answer whether such names exist there)."""
    root, outside = tmp_path / "r", tmp_path / "outside"
    (outside / "run-20250101_000000-SECRETNAME").mkdir(parents=True)
    (outside / "offline-run-ALSOOUTSIDE").mkdir()
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "wandb").symlink_to(outside)
    srv = Server(root, roots=[root])
    for tool in ("get_wandb_run", "diagnose"):
        err, body = _call(srv, tool, {"run" if tool == "get_wandb_run" else "wandb": "proj"})
        assert err and "SECRETNAME" not in body and "ALSOOUTSIDE" not in body, body


def test_a_scripts_syntax_warning_never_prints_its_source_line_raw(tmp_path: Path) -> None:
    """Promises 3 and 4: preflight compiles the script; Python's SyntaxWarning printed the offending source line to stderr
    itself, past every redaction: tokens in clear, a window-title and a clear-screen escape."""
    token = "ghp_" + "A1b2C3d4" * 4 + "Zz9Y"
    (tmp_path / "train.py").write_text(f'x = 1\nif x is "{token}": print("\\x1b]0;PWNED\\x07\\x1b[2J")\nfor step in range(3): pass\n')
    proc = cli("preflight-run", str(tmp_path / "train.py"), "--out-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert "internal error" not in proc.stderr
    both = proc.stdout + proc.stderr
    assert token not in both and "\x1b]0;" not in both and "\x1b[2J" not in both, proc.stderr[-2000:]


def test_a_shard_index_with_a_huge_tensor_name_gets_a_short_verdict(tmp_path: Path) -> None:
    """Promise 9: a verdict of bounded size. The index's tensor name was quoted whole in 'lacks 1 tensor(s) ... e.g.':
    a 40 MB name made a 40 MB answer (and an 80 MB report from the CLI)."""
    ck = tmp_path / "checkpoint-5"
    _safetensors(ck / "model-00001-of-00001.safetensors")
    name = "X" * 2_000_000
    (ck / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"w": "model-00001-of-00001.safetensors", name: "model-00001-of-00001.safetensors"}}))
    err, body = _call(Server(tmp_path), "inspect_checkpoint", {"path": str(ck)})
    assert not err and "lacks 1 tensor" in body and len(body) < 20_000, len(body)


def test_a_script_too_large_to_parse_safely_is_skipped_not_compiled(tmp_path: Path) -> None:
    """Promise 9: no blow-up from a hostile file. A flat 3 MiB literal took 1.6 GB to compile and parse (about 500 bytes
    per source byte, 8-9 GB at the 16 MiB read cap). A script over 512 KiB is not compiled; one of normal size still is."""
    from ml_skills.checks.report import Verdict
    from ml_skills.checks.screens.script import compile_check

    big = tmp_path / "big.py"
    big.write_text("x = [" + "0," * (1536 * 1024) + "]\n")
    check, tree = compile_check(big)
    assert check.verdict is Verdict.SKIP and tree is None and "not compiled" in check.detail
    small = tmp_path / "small.py"
    small.write_text("import os\nfor step in range(3):\n    print(step)\n")
    assert compile_check(small)[0].verdict is Verdict.PASS


_TIFF_MEMORY = """
import resource, sys
from pathlib import Path
from ml_skills.checks.screens.data import memory_check
check, _ = memory_check(Path(sys.argv[1]), 1, 1 << 40)
print(check.verdict.value, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def test_a_sparse_tiff_whose_tag_spans_the_file_is_sized_in_bounded_memory(tmp_path: Path) -> None:
    """Promise 9: bounded memory. Pillow reads a TIFF tag's data eagerly, whatever length it claims: a 4 KB sparse TIFF
    of 100 MB apparent size whose BitsPerSample spans the file took 1.1 GB in the data screen (200 MB: 2 GB). Only an
    image's first MiB is handed to Pillow now; memory is compared with the same screen on an ordinary TIFF."""
    pytest.importorskip("PIL")
    data = tmp_path / "data"
    data.mkdir()
    n = 200 * 1024 * 1024
    entries = [(256, 3, 1, struct.pack("<HH", 16, 0)), (257, 3, 1, struct.pack("<HH", 16, 0)), (258, 3, n // 2, struct.pack("<I", 64))]
    ifd = struct.pack("<H", len(entries)) + b"".join(struct.pack("<HHI", t, ty, c) + d for t, ty, c, d in entries) + struct.pack("<I", 0)
    with (data / "img.tif").open("wb") as f:
        f.write(b"II*\x00" + struct.pack("<I", 8) + ifd)
        f.truncate(64 + n)
    control = tmp_path / "control"
    control.mkdir()
    from PIL import Image

    Image.new("L", (16, 16)).save(control / "img.tif")  # the same screen on an ordinary TIFF: the import's own memory
    peaks = []
    for d in (control, data):
        proc = subprocess.run([sys.executable, "-c", _TIFF_MEMORY, str(d)], capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        peaks.append(int(proc.stdout.split()[-1]))
    assert peaks[1] - peaks[0] < 150, f"peak {peaks[1]} MiB against {peaks[0]} MiB for an ordinary TIFF (2 GB more before)"


def test_grep_keeps_at_most_max_matches_lines_and_stops_once_its_call_is_past_its_deadline(tmp_path: Path) -> None:
    """Promise 9: an abandoned call stops working. A pattern matching every line kept the whole log in one block (a
    block's after-context took in every further match), judged line by line after the tool had answered 'did not
    finish': the server burned a core for 35 s more. At most max_matches matched lines are kept, and a loop over a file
    stops at the call's deadline."""
    from ml_skills import calltime
    from ml_skills.collectors import logfile
    from ml_skills.errors import DeadlinePassed

    log = tmp_path / "big.log"
    log.write_text("".join(f"step {i} loss 0.5\n" for i in range(20_000)))
    blocks, total = logfile.grep(log, r".", context=2, max_matches=5)
    assert total == 20_000 and sum(len(b) for _, b in blocks) <= 5 + 2, [len(b) for _, b in blocks]
    token = calltime.start(-1)  # a call already past its deadline
    try:
        with pytest.raises(DeadlinePassed):
            logfile.grep(log, r".", context=2, max_matches=5)
    finally:
        calltime.end(token)
    assert logfile.grep(log, r"step 19999 ", 0, 5)[1] == 1  # outside a call: no deadline
