"""Issue 14's seventy-fifth round: an outside tester (a helper session that did not write this code) on all promises; each
break failed on the code before its fix (docs/security.md, "Seventy-fifth round").

JSON's own escape of `/` (`\\/`, PHP's json_encode writes every slash so) hid a URL's password, a webhook's secret and a refresh
token from every rule, and an `@` written as `\\u0040`, `&#64;` or `&commat;` hid a URL's password. A resume pointer written as an
fsspec URL with no slash (`file:ckpts/...`, `simplecache::...`) or through /proc (`/proc/self/cwd/...`) named a valid checkpoint
for its reader, was read as missing, and was moved to an older one with nobody asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.safety.redact import redact

from tests.conftest import run_cli
from tests.security.test_any_channel import _mcp_channels, _real_run

PW = "Vq7RxT2mK9wLp4Z"
SPELLED = {
    "json-solidus-url": f'{{"db": "postgres:\\/\\/admin:{PW}@db.internal:5432\\/x"}}',
    "json-solidus-webhook": f'{{"hook": "https:\\/\\/hooks.slack.com\\/services\\/T0A1B2C3D4\\/B0E1F2G3H4\\/{PW}Ab4Cd6Xk9"}}',
    "json-at": f"postgres://admin:{PW}\\u0040db.internal:5432/x",
    "html-at": f"postgres://admin:{PW}&#64;db.internal:5432/x",
    "html5-at": f"postgres://admin:{PW}&commat;db.internal:5432/x",
}


@pytest.mark.parametrize("name", sorted(SPELLED))
def test_a_slash_or_at_sign_written_as_an_escape_hides_no_secret(name: str) -> None:
    assert PW not in redact(SPELLED[name]), redact(SPELLED[name])


def test_a_backtick_escape_and_a_windows_path_read_as_before() -> None:
    assert redact("a \\u0060 b") == "a \\u0060 b"  # only the characters a secret's shape is made of are decoded
    assert redact("C:\\\\Users\\\\me") == "C:\\\\Users\\\\me"


@pytest.mark.slow
def test_escaped_slashes_and_at_signs_are_redacted_in_every_channel(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    log = _real_run(run_dir, list(SPELLED.values()), SPELLED["json-solidus-url"])
    cli = run_cli("check-failed-run", str(log), "--out-dir", str(tmp_path / "out"))
    shown = [*_mcp_channels(tmp_path, run_dir, log), cli.stdout, cli.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    leaks = [i for i, out in enumerate(shown) if PW in out]
    assert not leaks, [shown[i][:300] for i in leaks]


@pytest.mark.parametrize("spelled", ["file:ckpt-200", "file:./ckpt-200", "simplecache::ckpt-200", "/proc/self/cwd/ckpt-200",
                                     "/proc/thread-self/cwd/ckpt-200"])
def test_a_pointer_spelled_as_its_reader_resolves_it_is_never_moved_unasked(tmp_path: Path, spelled: str) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    from tests.mcp.conftest import Server, call_once

    run = tmp_path / "run"
    for step in (100, 200):
        (run / f"ckpt-{step}").mkdir(parents=True)
        save_file({"w": np.ones((4, 4), dtype=np.float32)}, str(run / f"ckpt-{step}" / "model.safetensors"))
    (run / "latest").write_text(spelled + "\n")
    _err, shown, data = call_once(Server(tmp_path, roots=[tmp_path]), "request_action", {
        "action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"), "checkpoint": str(run / "ckpt-100")}})
    assert (run / "latest").read_text() == spelled + "\n", shown
    assert data.get("outcome") == "no-elicitation", shown[:400]
