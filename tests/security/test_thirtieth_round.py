"""Issue 14's thirtieth round: the twenty-ninth round's open note (an --out-dir 1,500 levels deep) and an outside tester's
attacks (a helper session that did not write this code). Each test drives the server over stdio, the CLI in a child
process, or the function the claim is about; each failed on the code before its fix (docs/security.md, "Thirtieth
round")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security.childcli import cli

pytestmark = pytest.mark.slow  # real child processes

LOG = Path(__file__).resolve().parents[1] / "corpus"


def test_an_out_dir_thousands_of_levels_deep_is_made_or_refused_never_a_recursion_error(tmp_path: Path) -> None:
    """Promise 9: an --out-dir 1,500 levels deep raised RecursionError from pathlib's mkdir after ~1,000 levels (an
    'internal error'); one deeper than PATH_MAX is refused with its reason."""
    log = next(LOG.glob("2043-*")) / "train.log"
    deep = "/".join(["d"] * 1500)
    try:
        made = cli("check-failed-run", str(log), "--out-dir", deep, cwd=tmp_path)
        assert made.returncode == 0, made.stderr[-500:]
        assert "internal error" not in made.stderr and (tmp_path / deep / "check-failed-run.json").is_file()
        too_deep = cli("check-failed-run", str(log), "--out-dir", "/".join(["dd"] * 2100), cwd=tmp_path)
        assert too_deep.returncode != 0 and "Traceback" not in too_deep.stderr and "internal error" not in too_deep.stderr
        assert "cannot create --out-dir" in too_deep.stderr
    finally:  # shutil.rmtree (pytest's cleanup) recurses once per level too
        for top in ("d", "dd"):
            _remove_chain(tmp_path, top)


def _remove_chain(base: Path, name: str) -> None:
    """Remove base/name/name/... (files at any level) from the bottom up, with no recursion."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    fds = [fd]
    while name in os.listdir(fds[-1]):
        fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
    for parent, child in zip(reversed(fds[:-1]), reversed(fds[1:]), strict=True):
        for entry in os.listdir(child):
            if entry != name:
                os.unlink(entry, dir_fd=child)
        os.close(child)
        os.rmdir(name, dir_fd=parent)
    os.close(fd)
