"""Regenerate the ssh outputs in docs/remote-and-process.md.

    PYTHONPATH=server python bench/remote_transcripts.py

A real OpenSSH server on loopback with throwaway keys, started as tests/collectors/sshd.py starts
it for tests/collectors/test_ssh.py (one normal port, one whose ForceCommand sleeps), reached
through ML_SKILLS_SSH_CONFIG. The remote run directory /tmp/runs/exp7 holds the real NaN log of
examples/nan-loss and the train_args.json test_ssh.py writes beside it. Ports change from one
regeneration to the next.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_blocks import ROOT, replace_fenced, run_cli, shown
from tests.collectors import sshd

DOC = ROOT / "docs" / "remote-and-process.md"
WORK = Path(tempfile.gettempdir()) / "ml-skills-docs" / "ssh"
RUN = Path("/tmp/runs/exp7")
TARGET = f"root@127.0.0.1:{RUN}/train.log"
HEADING = "## Remote logs: `user@host:/path/to/train.log`"
FETCH = "### For assistants that run shell: `fetch-remote-log.sh`"


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    RUN.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "examples" / "nan-loss" / "train.log", RUN / "train.log")
    (RUN / "train_args.json").write_text('{"lr": 0.15, "epochs": 3}')
    server = sshd.start(WORK)
    try:
        ok = {"ML_SKILLS_SSH_CONFIG": server.client_config("ok")}
        text = DOC.read_text()
        report = run_cli(["check-failed-run", TARGET], ok, WORK)
        text = replace_fenced(text, HEADING, shown(f"ml-skills check-failed-run {TARGET}", report))
        faults = [
            ({"ML_SKILLS_SSH_CONFIG": server.client_config("closed", port=sshd.free_port())}, TARGET, "   # nothing listens on the port"),
            ({"ML_SKILLS_SSH_CONFIG": server.client_config("unknown", known_hosts="empty_known_hosts")}, TARGET,
             "   # host key not in known_hosts"),
            ({"ML_SKILLS_SSH_CONFIG": server.client_config("wrongkey", key="otherkey")}, TARGET, "   # the key is not authorized"),
            ({"ML_SKILLS_SSH_CONFIG": server.client_config("sleepy", port=server.sleep_port), "ML_SKILLS_SSH_DEADLINE": "3"}, TARGET,
             "   # the host hangs"),
            (ok, "root@-oProxyCommand=sh:/tmp/x.log", ""),
        ]
        lines = []
        for env, target, note in faults:
            prefix = "ML_SKILLS_SSH_DEADLINE=3 " if "ML_SKILLS_SSH_DEADLINE" in env else ""
            quoted = f"'{target}'" if "-o" in target else target
            lines.append(shown(f"{prefix}ml-skills check-failed-run {quoted}{note}", run_cli(["check-failed-run", target], env, WORK)))
        text = replace_fenced(text, HEADING, "\n".join(lines), nth=1)
        script = "skills/check-failed-run/scripts/fetch-remote-log.sh"
        fetch_dir = WORK / "fetch"
        fetch_dir.mkdir()
        proc = subprocess.run(["bash", str(ROOT / script), TARGET], cwd=fetch_dir, env={**os.environ, **ok},
                              capture_output=True, text=True, timeout=60, check=False)
        text = replace_fenced(text, FETCH, shown(f"{script} {TARGET}", proc))
        DOC.write_text(text)
        print("remote: report, 5 faults, fetch-remote-log.sh")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
