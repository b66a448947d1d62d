"""Issue 14's fifty-ninth round: an outside tester's real restarts (a helper session that did not write this code); each
break failed on the code before its fix (docs/security.md, "Fifty-ninth round").

pyenv's shim read `.python-version` when it started, after the server's last check: one written in that gap ran Python
2.7.18 (6 of 6 tries); the start is now pinned with PYENV_VERSION to the version the question shows. The version file was
read through a link, quoting a file outside the roots in the question. And accelerate's config passed a mapping under a
known top-level key (`main_training_function: {no_python: true}`: accelerate copies its keys onto its options) and a second
`--config-file` (accelerate reads the last; only the first was judged): both ran a program that was not Python.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text
from tests.security.test_fortyfifth_round import _restart
from tests.security.test_fortysecond_round import _run_folder, _stand_ins

pytestmark = pytest.mark.slow  # real child processes

SHIMS = Path.home() / ".pyenv" / "shims"
needs_pyenv = pytest.mark.skipif(not (SHIMS / "python").is_file(), reason="no pyenv shims on this machine")


def ask_restart(tmp_path: Path, run: Path, person) -> str:
    """request_action restart-unchanged of `run`'s command.txt from a client whose person answers with `person`."""
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=person) as c:
            got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                              "command_file": str(run / "command.txt")}})))

    anyio.run(go)
    return got[0]


@needs_pyenv
def test_the_shims_interpreter_is_pinned_to_the_version_the_question_shows(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    seen = tmp_path / "SEEN"
    (run / "train.py").write_text(f"import os, sys\nopen({str(seen)!r}, 'w').write(os.environ.get('PYENV_VERSION', '-') + ' ' "
                                  "+ '.'.join(map(str, sys.version_info[:2])))\n")
    (run / "command.txt").write_text("python train.py\n")
    person = answer("accept")
    got = ask_restart(tmp_path, run, person)
    for _ in range(40):
        if seen.exists():
            break
        time.sleep(0.5)
    pinned, version = seen.read_text().split()
    assert pinned != "-" and version.startswith("3.") and f"PYENV_VERSION=\"{pinned}\"" in person.shown[0], (got, person.shown)


@needs_pyenv
def test_a_version_file_written_while_the_person_reads_is_shown_before_anything_starts(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    ran = tmp_path / "RAN"
    (run / "train.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    (run / "command.txt").write_text("python train.py\n")
    accept = answer("accept")

    async def racer(ctx, params):
        (run / ".python-version").write_text("2.7.18\n")  # written after the question was built, before the start
        return await accept(ctx, params)

    got = ask_restart(tmp_path, run, racer)
    time.sleep(3)
    # nothing starts on the first answer: the call is asked again (2026-07-28 protocol: the approval no longer fits the
    # action) or stopped ("nothing was started"); what runs was shown with the file and its pin
    assert len(accept.shown) > 1 or "nothing was started" in got, (got, accept.shown)
    assert not ran.exists() or ".python-version" in accept.shown[-1] and 'PYENV_VERSION="2.7.18"' in accept.shown[-1], accept.shown


@needs_pyenv
def test_a_version_file_linked_out_of_the_roots_is_never_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", f"{SHIMS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    run = _run_folder(tmp_path)
    (tmp_path / "private.txt").write_text("db_host=10.1.2.3 customer_list=alice,bob internal-only\n")
    (run / ".python-version").symlink_to(tmp_path / "private.txt")
    (run / "train.py").write_text("print('train')\n")
    (run / "command.txt").write_text("python train.py\n")
    person = answer("decline")
    got = ask_restart(tmp_path, run, person)
    shown = " ".join(person.shown) + got
    assert person.shown and "customer_list" not in shown and "10.1.2.3" not in shown, shown


@pytest.mark.parametrize("config, line", [
    (("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nuse_cpu: true\nnum_processes: 1\n"
      "main_training_function:\n  no_python: true\n"), "accelerate launch --config_file cfg.yaml --num_processes 1 train.py"),
    ("compute_environment: LOCAL_MACHINE\nmpirun_config:\n  no_python: true\n",
     "accelerate launch --config_file good.yaml --config-file cfg.yaml --num_processes 1 train.py"),
])
def test_accelerates_config_is_judged_as_accelerate_reads_it(tmp_path: Path, monkeypatch, config: str, line: str) -> None:
    started = _stand_ins(tmp_path, monkeypatch)
    run = _run_folder(tmp_path)
    (run / "cfg.yaml").write_text(config)
    (run / "good.yaml").write_text("compute_environment: LOCAL_MACHINE\nnum_processes: 1\n")
    (run / "train.py").write_text("print('train')\n")
    got = _restart(tmp_path, line)
    time.sleep(2)
    assert not started.exists(), got
    assert "not restarted" in got, got


def test_a_google_key_file_on_a_recorded_line_is_refused(tmp_path: Path) -> None:
    """`GOOGLE_APPLICATION_CREDENTIALS=./gac.json python train.py`: an external-account key file's `credential_source.file`
    is read by google-auth and sent as the subject token to the `token_url` the file names (any file of the server, to
    any host; the question named no route). The server's own variable is still inherited."""
    run = _run_folder(tmp_path)
    (run / "train.py").write_text("print('train')\n")
    (run / "gac.json").write_text('{"type": "external_account", "token_url": "http://127.0.0.1:9/v1/token", '
                                  '"credential_source": {"file": "/etc/hostname"}}')
    got = _restart(tmp_path, "GOOGLE_APPLICATION_CREDENTIALS=./gac.json python train.py")
    assert "not restarted" in got and "GOOGLE_APPLICATION_CREDENTIALS" in got, got
