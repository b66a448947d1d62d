"""Issue 14's fifty-seventh round: an outside tester's attacks on promises 3, 4, 5 and 9 (a helper session that did not
write this code); each break failed on the code before its fix (docs/security.md, "Fifty-seventh round").

A live process's command line was joined with bare spaces before it was redacted, so a secret holding spaces
(`--db_password "correct horse ... staple"`) lost the quotes that end its value and only its first word was masked: in
`check_process`, the kill-worker question and the CLI's `--proc`. And an MLflow run's `artifact_uri` outside the roots told
an existing folder ("outside the allowed roots") from a missing one ("not on this machine"): an is_dir() ran before the
path was confined.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, answers, text
from tests.security import fakes

pytestmark = pytest.mark.slow  # real child processes, a real MLflow store


@pytest.fixture
def sleeper_with_a_passphrase():
    secret = f"correct horse {fakes.rand(fakes.ALNUM, 20)} staple"
    attached = f"battery {fakes.rand(fakes.ALNUM, 20)} staple"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "train_atk57.py", "--db_password", secret,
                             f"--hub_token={attached}"])
    yield proc, [secret.split()[2], attached.split()[1]]
    proc.kill()
    proc.wait(timeout=10)


def test_a_secret_holding_spaces_in_a_live_command_line_is_masked_whole(tmp_path: Path, sleeper_with_a_passphrase) -> None:
    proc, hidden = sleeper_with_a_passphrase
    srv = Server(tmp_path, roots=[tmp_path])
    shown = answers(srv, [("check_process", {"pid": proc.pid})])
    person = answer("decline")

    async def ask() -> None:
        async with srv.client(elicit=person) as c:
            shown.append(text(await c.call_tool("request_action", {"action": {"kind": "kill-worker", "pid": proc.pid}})))

    anyio.run(ask)
    cli = subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--proc", "train_atk57.py",
                          "--out-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=120, check=False)
    shown += [*person.shown, cli.stdout, cli.stderr]
    assert person.shown and "--db_password" in person.shown[0], person.shown
    for s in shown:
        for word in hidden:
            assert word not in s, s[:2000]


def test_an_mlflow_artifact_folder_outside_the_roots_gets_one_answer_whether_it_exists_or_not(tmp_path: Path) -> None:
    """A real MLflow sqlite store inside the root, two runs whose artifact_uri name an existing and a missing folder outside."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    (outside / "there").mkdir(parents=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    code = ("import sys\nfrom mlflow.tracking import MlflowClient\n"
            f"c = MlflowClient(tracking_uri={uri!r})\n"
            "for where in sys.argv[1:]:\n"
            "    e = c.create_experiment(where.replace('/', '_'), artifact_location=where)\n"
            "    r = c.create_run(e)\n    c.log_metric(r.info.run_id, 'loss', 1.0)\n    print(r.info.run_id)\n")
    done = subprocess.run([sys.executable, "-c", code, str(outside / "there"), str(outside / "not-there")], cwd=tmp_path,
                          check=True, timeout=300, capture_output=True, text=True)
    ids = done.stdout.split()[-2:]
    (outside / "there" / ids[0] / "artifacts").mkdir(parents=True)  # the first run's artifact folder exists, the second's not
    assert not (outside / "not-there").exists()
    os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        shown = answers(Server(tmp_path, roots=[root]), [("get_mlflow_run", {"run_id": i}) for i in ids])
    finally:
        del os.environ["MLFLOW_TRACKING_URI"]
    notes = [re.sub(r"\b[0-9a-f]{16}\b", "M", s.replace(f"{outside / 'there'}/{ids[0]}", "DIR").replace(
        f"{outside / 'not-there'}/{ids[1]}", "DIR")) for s in shown]  # each answer's own marker and run folder
    about = [[n for n in note.split('"') if "DIR" in n and "artifact" in n] for note in notes]
    assert about[0] and about[0] == about[1], about
    assert "not on this machine" not in shown[1], shown[1][:2000]
