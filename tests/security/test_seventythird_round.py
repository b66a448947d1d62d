"""Issue 14's seventy-third round: an outside tester (a helper session that did not write this code) on promises 5, 7, 8
and 9; each break failed on the code before its fix (docs/security.md, "Seventy-third round").

A W&B run name shaped like entity/project/run was looked up in the server's working folder, outside the roots, before it
was confined: whether `ent/proj/run1` existed there changed the answer (an existence oracle).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp.conftest import Server, answers


def test_a_wandb_run_name_is_never_looked_up_in_the_servers_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "R").mkdir()
    (tmp_path / "ent" / "proj" / "run1").mkdir(parents=True)  # only in the server's working folder (tmp_path), outside R
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens: no network
    monkeypatch.setenv("WANDB_API_KEY", "local-fake-key-0000000000000000000000000000")
    srv = Server(tmp_path, roots=[tmp_path / "R"])
    got = answers(srv, [("get_wandb_run", {"run": "ent/proj/run1"}), ("get_wandb_run", {"run": "ent/proj/run9"}),
                        ("diagnose", {"wandb": "ent/proj/run1"}), ("diagnose", {"wandb": "ent/proj/run9"})])
    plain = [g.split("[data ")[1].split("]", 1)[1].split("[/data")[0].replace("run1", "RUN").replace("run9", "RUN") for g in got]
    assert plain[0] == plain[1] and plain[2] == plain[3], plain
    assert not any("nothing at" in g for g in got), got
