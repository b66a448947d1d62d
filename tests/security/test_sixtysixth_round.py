"""Issue 14's sixty-sixth round (inside): the script a recorded line names is what the person reads (real restarts), and
a token split by a braille blank, an invalid byte or an escape before a letter is redacted (the sixty-fifth round's gaps).

`python train.py` shows a file name; python runs a folder's `__main__.py` when the name is a folder, the `__main__.py` of
a zip archive when the file is one, and compiled bytecode when the file opens with a bytecode magic number, whatever its
name; a link (the file, or a folder on its way) runs a file outside the run folder; a source encoding of utf-7 runs a
line an editor shows as a comment. And `python sub/train.py` puts `sub/`, not the run folder, first on the script's import path: the launcher-package
check looked only at the run folder, and not at a recorded PYTHONPATH entry either (`PYTHONPATH=lib torchrun ...` with
`lib/torch/`: torchrun's agent imported it). Each planted program below ran after an accept on the commit before
(docs/security.md, "Sixty-sixth round").
"""

from __future__ import annotations

import importlib.util
import py_compile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text

pytestmark = pytest.mark.slow  # real child processes

Setup = Callable[[Path, str], None]  # (the run folder, the planted program's source)


def _zip(run: Path, planted: str) -> None:
    with zipfile.ZipFile(run / "train.py", "w") as z:
        z.writestr("__main__.py", planted)


def _bytecode(run: Path, planted: str) -> None:
    (run / "src.py").write_text(planted)
    py_compile.compile(str(run / "src.py"), cfile=str(run / "compiled.pyc"), doraise=True)
    (run / "train.py").write_bytes((run / "compiled.pyc").read_bytes())
    (run / "src.py").unlink()
    (run / "compiled.pyc").unlink()
    assert (run / "train.py").read_bytes()[:4] == importlib.util.MAGIC_NUMBER


def _folder(run: Path, planted: str) -> None:
    (run / "train.py").mkdir()
    (run / "train.py" / "__main__.py").write_text(planted)


def _shadow_beside(run: Path, planted: str) -> None:
    (run / "sub").mkdir()
    (run / "sub" / "train.py").write_text("import torch\nprint('train')\n")
    (run / "sub" / "torch.py").write_text(planted)


def _link_out(run: Path, planted: str) -> None:
    outside = run.parents[1] / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "train.py").write_text(planted)
    (run / "train.py").symlink_to(outside / "train.py")


def _folder_link_out(run: Path, planted: str) -> None:
    outside = run.parents[1] / "outside-folder"
    outside.mkdir()
    (outside / "train.py").write_text(planted)
    (run / "sub").symlink_to(outside)


def _utf7(run: Path, planted: str) -> None:
    """What an editor shows: one print and a comment. Python decodes utf-7, where '+AAo-' is a newline: the comment runs."""
    (run / "train.py").write_text(f"# -*- coding: utf-7 -*-\nprint('train')\n# +AAo-{planted.strip()}\n", encoding="ascii")


def _torch_on_pythonpath(run: Path, planted: str) -> None:
    (run / "train.py").write_text("print('train')\n")
    (run / "lib" / "torch").mkdir(parents=True)
    (run / "lib" / "torch" / "__init__.py").write_text(planted)


CASES: list[tuple[str, str, Setup, str]] = [
    ("zip", "python train.py", _zip, "zip archive"),
    ("bytecode", "python -u train.py --epochs 1", _bytecode, "compiled bytecode"),
    ("folder", "python train.py", _folder, "not a regular file"),
    ("beside", "python sub/train.py", _shadow_beside, "sub/torch.py"),
    ("torchrun-zip", "torchrun --nproc-per-node 1 train.py", _zip, "zip archive"),
    ("link", "python train.py", _link_out, "a link in the run folder"),
    ("folder-link", "python -u sub/train.py", _folder_link_out, "a link in the run folder"),
    ("pythonpath", "PYTHONPATH=lib torchrun --nproc-per-node 1 train.py", _torch_on_pythonpath, "PYTHONPATH entry"),
    ("utf-7", "python train.py", _utf7, "source encoding"),
    ("pythonpath-absolute", "PYTHONPATH={run}/lib torchrun --nproc-per-node 1 train.py", _torch_on_pythonpath, "PYTHONPATH entry"),
]


def _restart_all(tmp_path: Path, cases: list[tuple[str, str, Setup, str]]) -> dict[str, tuple[str, Path]]:
    """Each case in a run folder of its own, asked of one server whose person accepts every question: what it answered,
    and the marker its planted program would write."""
    runs = {}
    for name, line, setup, _ in cases:
        run = tmp_path / "root" / name
        run.mkdir(parents=True)
        marker = tmp_path / f"PWNED-{name}"
        setup(run, f"open({str(marker)!r}, 'w').write('planted')\n")
        (run / "command.txt").write_text(line.format(run=run) + "\n")
        runs[name] = (run, marker)
    got: dict[str, tuple[str, Path]] = {}

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=answer("accept")) as c:
            for name, (run, marker) in runs.items():
                out = text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                             "command_file": str(run / "command.txt")}}))
                got[name] = (out, marker)

    anyio.run(go)
    return got


def _assert_all_refused(tmp_path: Path, cases: list[tuple[str, str, Setup, str]]) -> None:
    """Every case refused with its own reason, and no planted program ran (its marker written within 8 s)."""
    got = _restart_all(tmp_path, cases)
    time.sleep(8)  # time for anything started to write its marker
    ran = [name for name, (_, marker) in got.items() if marker.exists()]
    unexplained = [(name, got[name][0]) for name, _, _, why in cases if "not restarted" not in got[name][0] or why not in got[name][0]]
    assert not ran and not unexplained, (ran, unexplained)


def test_a_script_that_is_not_source_the_person_can_read_is_refused(tmp_path: Path) -> None:
    _assert_all_refused(tmp_path, CASES)


def test_a_plain_script_in_a_subfolder_and_a_site_packages_on_pythonpath_still_restart(tmp_path: Path) -> None:
    def plain(run: Path, planted: str) -> None:
        (run / "sub").mkdir()
        (run / "sub" / "train.py").write_text(planted)

    torch = pytest.importorskip("torch")
    site = Path(torch.__file__).parents[1]  # an environment's own site-packages, which holds torch by right
    got = _restart_all(tmp_path, [("plain", "python sub/train.py", plain, ""),
                                  ("site-packages", f"PYTHONPATH={site} python sub/train.py", plain, "")])
    for name, (out, marker) in got.items():
        for _ in range(40):
            if marker.exists():
                break
            time.sleep(0.5)
        assert marker.exists(), (name, out)  # the restart ran the script the line names


TOKEN = "ghp_" + "Zq7Kp2Lm9Xw4Rt8Yv3Nb6Hc1Jd5Fg0Sa2Qe4"  # a GitHub token's shape: ghp_ and 36 letters and digits
SPLITS = {"braille-blank": "\u2800", "replacement": "\ufffd", "escape-letter": "\x1b"}  # ESC before the token's own N


def test_every_cc_and_cf_character_but_tab_and_newline_is_stripped() -> None:
    import sys
    import unicodedata

    from ml_skills.safety.invisible import strip_invisible

    kept = [hex(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Cc", "Cf") and chr(c) not in "\t\n"
            and chr(c) not in "\x1b\x9b" and strip_invisible(f"a{chr(c)}b")[0] != "ab"]  # ESC and CSI begin an escape
    assert not kept, kept


@pytest.mark.parametrize("split", list(SPLITS), ids=list(SPLITS))
def test_a_token_split_by_a_blank_an_invalid_byte_or_an_escape_before_a_letter_is_redacted(tmp_path: Path, split: str) -> None:
    """The sixty-fifth round's gap: a real process prints the token split (U+2800 drawn as nothing; a byte that is not UTF-8,
    read as U+FFFD; ESC then a letter, which stripping removed whole, leaving the token one character short of its shape):
    neither piece may appear in any channel, the terminal report and check-failed-run.json included."""
    from tests.conftest import run_cli
    from tests.security.test_any_channel import _mcp_channels, _real_run

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cut = 4 + 18
    assert TOKEN[cut] == "N"  # ESC N is a two-character escape (SS2): stripped whole, it took the token's N
    split_token = TOKEN[:cut] + SPLITS[split] + TOKEN[cut:]
    log = _real_run(run_dir, [f"auth: using token {split_token} for the hub"], f"token {split_token}")
    if split == "replacement":  # as the file really holds it: one byte that is not UTF-8
        log.write_bytes(log.read_bytes().replace("\ufffd".encode(), b"\xff"))
        assert b"\xff" in log.read_bytes()
    cli = run_cli("check-failed-run", str(log), "--out-dir", str(tmp_path / "out"))
    shown = [*_mcp_channels(tmp_path, run_dir, log), cli.stdout, cli.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    pieces = [TOKEN[4:cut], TOKEN[cut:]]
    leaks = [(i, piece) for i, out in enumerate(shown) for piece in pieces if piece in out]
    assert not leaks, leaks
