"""Issue 14's seventy-fourth round: an outside tester (a helper session that did not write this code) on promises 1, 2, 3,
4 and 5b; each break failed on the code before its fix (docs/security.md, "Seventy-fourth round").

HTML character references were decoded only as written with their `;` and by a few names: HTML5 and `html.unescape` also
read a numeric reference with no `;` (`&#103hp_...`, `password&#61X`) and HTML5's own names (`ghp&UnderBar;...`), and the
token came back whole in every channel (log tools, the report, a process's command line in the approval question, folder
names, a refused restart's error).
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from ml_skills.safety.redact import redact

from tests.conftest import run_cli
from tests.security.test_any_channel import _mcp_channels, _real_run

BODY = "vHFWHzbogFU1cfsImSlk4R06rl5jj6XW4HD7"  # a GitHub token's 36 letters and digits
SPELLINGS = {"no-semicolon": f"&#103hp_{BODY}", "hex-no-semicolon": f"&#x67hp_{BODY}", "html5-name": f"ghp&UnderBar;{BODY}",
             "invisible-html5-name": f"ghp_{BODY[:10]}&it;{BODY[10:]}", "assignment": "password&#61XsecretVal9"}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_an_html5_spelling_of_a_secret_is_read_as_html_unescape_reads_it(name: str) -> None:
    spelled = SPELLINGS[name]
    assert redact(html.unescape(spelled)) != html.unescape(spelled)  # what a reader decodes is a secret the rules mask
    shown = redact(spelled)
    assert BODY[4:20] not in shown and "secretVal9" not in shown, shown


@pytest.mark.slow
def test_html5_spellings_of_a_token_are_redacted_in_every_channel(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [f"push with {s}" for s in SPELLINGS.values()]
    log = _real_run(run_dir, lines, SPELLINGS["html5-name"])
    cli = run_cli("check-failed-run", str(log), "--out-dir", str(tmp_path / "out"))
    shown = [*_mcp_channels(tmp_path, run_dir, log), cli.stdout, cli.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    leaks = [i for i, out in enumerate(shown) if BODY[4:20] in out or "secretVal9" in out]
    assert not leaks, [shown[i][:300] for i in leaks]


@pytest.mark.parametrize("content", ['"ckpt-200"\n', '{"checkpoint": "ckpt-200"}\n', "['ckpt-200']\n"])
def test_a_pointer_holding_a_quoted_or_structured_value_is_never_rewritten(tmp_path: Path, content: str) -> None:
    """A `latest` pointer written with json.dump named a valid checkpoint; read as a file named with its quotes it was
    'missing', so a client that cannot ask the person moved it to an older checkpoint, in plain text its reader cannot parse."""
    import numpy as np
    from safetensors.numpy import save_file

    from tests.mcp.conftest import Server, call_once

    run = tmp_path / "run"
    for step in (100, 200):
        (run / f"ckpt-{step}").mkdir(parents=True)
        save_file({"w": np.ones((4, 4), dtype=np.float32)}, str(run / f"ckpt-{step}" / "model.safetensors"))
    (run / "latest").write_text(content)
    err, shown, _ = call_once(Server(tmp_path, roots=[tmp_path]), "request_action", {
        "action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"), "checkpoint": str(run / "ckpt-100")}})
    assert (run / "latest").read_text() == content, shown
    assert err and "quoted or structured value" in shown, shown


@pytest.mark.slow
def test_triage_of_a_folder_holding_a_wandb_run_leaves_nothing_in_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seventy-fourth round: each triage_runs call (and the CLI's triage-runs) over a folder holding a W&B run left two
    folders in TMPDIR (`tmp*wandb-media`, `tmp*wandb-artifacts`: `import wandb` makes them, and a pool worker leaves
    through os._exit, past the atexit handler that removes them)."""
    import os
    import subprocess
    import sys

    from tests.mcp.conftest import ROOT, Server, call_once

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    env = {**os.environ, "WANDB_DIR": str(run), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-m", "tests.collectors.wandb_offline", "healthy"], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=300)
    (run / "train.log").write_text("".join(f"step {i} loss {2 - i / 100:.3f}\n" for i in range(50)))
    for other in ("r2", "r3"):  # more runs than one, so the triage takes a pool of worker processes
        (tmp_path / "runs" / other).mkdir()
        (tmp_path / "runs" / other / "train.log").write_text((run / "train.log").read_text())
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    err, shown, _ = call_once(Server(tmp_path, roots=[tmp_path]), "triage_runs", {"targets": [str(tmp_path / "runs")], "workers": 2})
    assert not err, shown[:500]
    cli = run_cli("triage-runs", str(tmp_path / "runs"), "--workers", "2")
    assert cli.returncode in (0, 1), cli.stderr[-500:]
    assert sorted(os.listdir(scratch)) == [], sorted(os.listdir(scratch))
