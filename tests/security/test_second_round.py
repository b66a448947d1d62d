"""Issue 14's second round: attacks written by someone who did not write the fixes.

Each test is one attack that broke a claim of docs/security.md or docs/policy.md, through a real
server process and the MCP SDK's client over stdio (or the real CLI), with real processes, real
files and real checkpoints. Each failed on the code before its fix.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import safetensors.torch
import torch

from tests.mcp.conftest import Server, answer, text
from tests.security import fakes
from tests.security.racer import __file__ as RACER  # the attackers' swap loop

pytestmark = pytest.mark.slow  # each test starts a real server (about 5-30 s on 2 shared cores)


def roots(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed root R and a directory O beside it, outside the roots."""
    r, o = tmp_path / "root", tmp_path / "outside"
    r.mkdir()
    o.mkdir()
    return r, o


def srv_for(tmp_path: Path, r: Path) -> Server:
    s = Server(tmp_path, roots=[r])
    s.out = tmp_path / "out"
    return s


def restart(f: Path) -> dict:
    return {"action": {"kind": "restart-unchanged", "command_file": str(f)}}


# ---------------------------------------------------------------- restart: the launcher is the program that runs


def test_a_recorded_command_cannot_run_another_program_under_a_launchers_name(tmp_path: Path) -> None:
    """'It runs only a launcher's record ... starting with python, torchrun, ...; any other file, a
    script or a sh -c line is refused.' A `PATH=` prefix, a path to a file named `python`, or a
    launcher told to run a non-Python program (`torchrun --no-python`, `srun`, `mpirun`) turned
    the check on the first word into any program, even when the person accepts what reads as a
    training launch."""
    r, o = roots(tmp_path)
    fake = o / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ntouch {o}/PWNED_$1\n")
    fake.chmod(0o755)
    shell = f"sh -c 'touch {o}/PWNED_sh'"
    lines = {
        "path-prefix": f"PATH={fake.parent} python path-prefix",
        "abs-launcher": f"{fake} abs-launcher",
        "ld-preload": f"LD_PRELOAD={o}/evil.so python -c pass",
        "torchrun-no-python": f"torchrun --no-python {shell}",
        "torchrun-no-python-eq": f"torchrun --no_python {shell}",
        "srun": f"srun {shell}",
        "mpirun": f"mpirun -n 1 {shell}",
        "horovodrun": f"horovodrun -np 1 {shell}",
        "accelerate": f"accelerate launch --no_python {shell}",
        "deepspeed": f"deepspeed --no_python {shell}",
    }
    srv = srv_for(tmp_path, r)
    for name, line in lines.items():
        d = r / name
        d.mkdir()
        (d / "command.txt").write_text(line + "\n")
        res = anyio.run(_call, srv, restart(d / "command.txt"), answer("accept"))
        assert res.is_error, (name, text(res)[:300])
        assert "not on the server's PATH" not in text(res), (name, text(res)[:300])  # refused for what it runs, not by luck
    time.sleep(1)
    assert not [p.name for p in o.iterdir() if p.name.startswith("PWNED")]


def test_an_ordinary_recorded_launch_still_runs_after_the_person_accepts(tmp_path: Path) -> None:
    """The refusals above must not refuse what launchers really record (env prefixes included)."""
    r, o = roots(tmp_path)
    (r / "train.py").write_text(f"open({str(o / 'RAN')!r}, 'w').write('ok')\n")
    (r / "command.txt").write_text("CUDA_VISIBLE_DEVICES=0 PYTHONPATH=. python train.py --lr 3e-4\n")
    srv = srv_for(tmp_path, r)
    res = anyio.run(_call, srv, restart(r / "command.txt"), answer("accept"))
    assert not res.is_error and '"ran":true' in text(res), text(res)[:300]
    end = time.monotonic() + 20
    while not (o / "RAN").exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert (o / "RAN").exists()


async def _call(srv: Server, args: dict, elicit=None):
    async with srv.client(elicit=elicit) as c:
        return await c.call_tool("request_action", args)


# ---------------------------------------------------------------- repoint: the write stays where the check was


def test_a_safe_repoint_never_writes_outside_the_roots_while_its_folder_is_swapped(tmp_path: Path) -> None:
    """'Nothing is overwritten but a resume pointer' inside the roots. A safe repoint runs without
    asking; it checked `R/run/latest`, then created its temporary file and renamed it by path. With
    `R/run` swapped for a link to `O/run` in a loop, the rename landed on `O/run/latest`, a file
    outside the roots, without anyone being asked (23 of 150 attempts before the fix)."""
    r, o = roots(tmp_path)
    (r / "run").mkdir()
    (r / "ck").mkdir()
    (o / "run").mkdir()
    safetensors.torch.save_file({"w": torch.zeros(4)}, str(r / "ck" / "b.safetensors"))
    (r / "run" / "latest").write_text("gone\n")
    (o / "run" / "latest").write_text("ORIGINAL\n")
    (r / "evil").symlink_to(o / "run")
    srv = srv_for(tmp_path, r)
    act = {"action": {"kind": "repoint-checkpoint", "pointer_file": str(r / "run" / "latest"),
                      "checkpoint": str(r / "ck" / "b.safetensors")}}

    async def go() -> list[str]:
        out: list[str] = []
        async with srv.client() as c:
            # 250 attempts, and on until one went through (about 1 in 50 does, between two swaps): a run where the
            # racer happened to win all 250 proves nothing about the write, and failed a loaded CI run
            while len(out) < 250 or (not any('"ran":true' in t for t in out) and len(out) < 2000):
                out.append(text(await c.call_tool("request_action", act)))
        return out

    racer = subprocess.Popen([sys.executable, RACER, str(r / "run"), str(r / "evil"), "600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        outs = anyio.run(go)
    finally:
        racer.kill()
        racer.wait()
    assert (o / "run" / "latest").read_text() == "ORIGINAL\n"
    assert sorted(p.name for p in (o / "run").iterdir()) == ["latest"]  # no temporary file left there either
    assert any('"ran":true' in t for t in outs)  # the race was really run: some repoints went through


def test_repoint_never_overwrites_a_script_a_config_or_a_log_named_like_a_pointer(tmp_path: Path) -> None:
    """'Nothing is overwritten but a resume pointer' (latest*, resume*, last_checkpoint). `resume.py`,
    `resume.sh`, `latest_config.yaml` and `latest.log` match the names and hold one line, but they
    are a script, a config and a log: a safe repoint, asked of no one, rewrote each of them."""
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    safetensors.torch.save_file({"w": torch.zeros(4)}, str(run / "b.safetensors"))
    files = {"resume.py": "import os; os.system('echo resumed')\n", "resume.sh": "python train.py --resume ckpt\n",
             "latest_config.yaml": "lr: 0.1\n", "latest.log": "step 10 loss 2.3\n", "resume_from.json": '{"step": 3}\n'}
    for name, body in files.items():
        (run / name).write_text(body)
    srv = srv_for(tmp_path, r)

    async def go() -> list:
        async with srv.client(elicit=answer("accept")) as c:
            return [await c.call_tool("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / n),
                                                                    "checkpoint": str(run / "b.safetensors")}}) for n in files]

    for name, res in zip(files, anyio.run(go), strict=True):
        assert res.is_error and "not a resume pointer" in text(res), (name, text(res)[:300])
    assert {n: (run / n).read_text() for n in files} == files
    # the pointers that launchers really write are still rewritten
    for name in ("latest", "resume_from.txt", "last_checkpoint"):
        (run / name).write_text("old\n")
        res = anyio.run(_call, srv, {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / name),
                                                "checkpoint": str(run / "b.safetensors")}})
        assert '"ran":true' in text(res), (name, text(res)[:300])
        assert (run / name).read_text() == "b.safetensors\n"


# ---------------------------------------------------------------- secrets: grep_log is not an oracle


def test_grep_log_cannot_spell_out_a_redacted_secret_one_character_at_a_time(tmp_path: Path) -> None:
    """'Secrets never leave the server.' grep_log redacted the lines it returned, but matched the
    pattern against the raw line and returned `total_matches` and `match_lines`: `api-key g`,
    `api-key gh`, ... told a caller each next character of a value it only ever saw as [REDACTED]
    (the first 12 characters of a GitHub token in 200 calls). A line matches only as it is shown."""
    r, _ = roots(tmp_path)
    token = fakes.github()
    secret_pw = "Xq7" + token[-12:]
    log = r / "train.log"
    log.write_text(f"step 1 loss 2.0\n--api-key {token}\npassword: {secret_pw}\nAuthorization: Bearer {token}\nstep 2 loss 1.9\n")
    srv = srv_for(tmp_path, r)

    async def go() -> list[dict]:
        async with srv.client() as c:
            probes = [f"api-key {token[:n]}" for n in (1, 4, 8, 20, len(token))]
            probes += [f"password: {secret_pw[:n]}" for n in (1, 3, 8)]
            probes += [f"Bearer {token[:5]}", token[4:14], f"{token[-6:]}$"]
            return [json.loads(text(await c.call_tool("grep_log", {"path": str(log), "pattern": re.escape(p)}))) for p in probes]

    for res in anyio.run(go):
        assert res["total_matches"] == 0 and res["match_lines"] == [], res
    # the same call still finds ordinary text, and the line with the secret by its keyword (shown redacted)
    async def shown() -> tuple[dict, dict]:
        async with srv.client() as c:
            a = json.loads(text(await c.call_tool("grep_log", {"path": str(log), "pattern": "api-key"})))
            b = json.loads(text(await c.call_tool("grep_log", {"path": str(log), "pattern": "loss"})))
            return a, b

    a, b = anyio.run(shown)
    assert a["total_matches"] == 1 and "--api-key [REDACTED]" in a["text"] and token not in a["text"]
    assert b["total_matches"] == 2 and b["match_lines"] == [1, 5]


# ---------------------------------------------------------------- read_report: the same rules as every other read


def test_read_report_never_returns_a_report_outside_the_roots_while_its_folder_is_swapped(tmp_path: Path) -> None:
    """'No check-then-open': read_report confined the path, then opened it by name with open(); with
    its folder swapped for a link out of the roots in a loop, 4 of 200 calls returned the fields of a
    report outside the roots."""
    r, o = roots(tmp_path)
    (r / "rep").mkdir()
    (o / "rep").mkdir()
    (r / "rep" / "check-failed-run.json").write_text('{"schema_version": 1, "primary_cause": "inside"}')
    (o / "rep" / "check-failed-run.json").write_text('{"schema_version": 1, "primary_cause": "OUTSIDE_PLANTED"}')
    (r / "evil").symlink_to(o / "rep")
    srv = srv_for(tmp_path, r)

    async def go() -> list[str]:
        async with srv.client() as c:
            return [text(await c.call_tool("read_report", {"path": str(r / "rep" / "check-failed-run.json"),
                                                             "fields": ["primary_cause"]})) for _ in range(300)]

    racer = subprocess.Popen([sys.executable, RACER, str(r / "rep"), str(r / "evil"), "600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        outs = anyio.run(go)
    finally:
        racer.kill()
        racer.wait()
    assert not [t for t in outs if "OUTSIDE_PLANTED" in t]
    assert any('"inside"' in t for t in outs)


def test_read_report_on_json_nested_100000_deep_is_a_clear_refusal(tmp_path: Path) -> None:
    """Section 9: 'JSON goes through safety/untrusted_json.loads ... nesting deeper than 64 levels is
    refused.' read_report parsed with json.loads and answered 'failed unexpectedly (RecursionError)'."""
    r, _ = roots(tmp_path)
    (r / "check-failed-run.json").write_text('{"schema_version": 1, "primary_cause": ' + "[" * 100_000 + "]" * 100_000 + "}")
    srv = srv_for(tmp_path, r)

    async def go():
        async with srv.client() as c:
            return await c.call_tool("read_report", {"path": str(r / "check-failed-run.json"), "fields": ["primary_cause"]})

    res = anyio.run(go)
    assert res.is_error
    assert "unexpectedly" not in text(res) and "RecursionError" not in text(res), text(res)
    assert "check-failed-run.json" in text(res)


def test_a_restart_never_reads_a_command_file_outside_the_roots_while_its_folder_is_swapped(tmp_path: Path) -> None:
    """'No check-then-open' and 'only a launcher's record inside the roots': restart-unchanged confined
    `R/run/command.txt`, then read it by name; with `R/run` swapped for a link to `O/run` in a loop,
    the refusal quoted the first line of `O/run/command.txt`, a file outside the roots."""
    r, o = roots(tmp_path)
    (r / "run").mkdir()
    (o / "run").mkdir()
    (r / "run" / "command.txt").write_text("python -c pass\n")
    (o / "run" / "command.txt").write_text("OUTSIDE_PLANTED --from-outside\n")
    (r / "evil").symlink_to(o / "run")
    srv = srv_for(tmp_path, r)

    async def go() -> list[str]:
        async with srv.client() as c:  # no elicitation: nothing can run, only the preparation is raced
            return [text(await c.call_tool("request_action", restart(r / "run" / "command.txt"))) for _ in range(300)]

    racer = subprocess.Popen([sys.executable, RACER, str(r / "run"), str(r / "evil"), "600"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        outs = anyio.run(go)
    finally:
        racer.kill()
        racer.wait()
    assert not [t for t in outs if "OUTSIDE_PLANTED" in t]
    assert "OUTSIDE_PLANTED" not in srv.audit.read_text()
    assert any("no-elicitation" in t for t in outs)


def test_a_restart_is_never_approved_from_a_question_that_cuts_the_command(tmp_path: Path) -> None:
    """'Shown to the person exactly.' The question cut the recorded command at 1,000 characters with
    '...': 150 harmless `-W ignore` flags filled it, and the `-c` code after them, which the person
    never saw, ran once they accepted."""
    r, o = roots(tmp_path)
    srv = srv_for(tmp_path, r)
    for flags in (150, 400):  # 1,544 characters (once cut at 1,000) and 4,044
        (r / "command.txt").write_text("python " + "-W ignore " * flags + f"-c \"open({str(o / 'PWNED')!r}, 'w')\"\n")
        person = answer("accept")
        res = anyio.run(_call, srv, restart(r / "command.txt"), person)
        time.sleep(1)
        # either the person saw the whole command, code included, before it ran, or nothing ran and nobody was asked
        if person.shown:
            assert all("PWNED" in q for q in person.shown), person.shown[0][-200:]
        else:
            assert res.is_error and "too long to show" in text(res), text(res)[:300]
            assert not (o / "PWNED").exists()
        (o / "PWNED").unlink(missing_ok=True)


def test_a_repoint_never_writes_its_backup_through_a_link_planted_in_the_out_dir(tmp_path: Path) -> None:
    """'Nothing is overwritten but a resume pointer': the out dir defaults to the first allowed root,
    where anyone who can write a run can plant `repoint-backups` as a link out of the roots. A safe
    repoint, asked of no one, then created its backup file in that outside directory."""
    r, o = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    safetensors.torch.save_file({"w": torch.zeros(4)}, str(run / "b.safetensors"))
    (run / "latest").write_text("gone\n")
    (r / "repoint-backups").symlink_to(o)
    srv = Server(tmp_path, roots=[r])
    srv.out = r  # the default: the first allowed root
    act = {"action": {"kind": "repoint-checkpoint", "pointer_file": str(run / "latest"), "checkpoint": str(run / "b.safetensors")}}
    res = anyio.run(_call, srv, act)
    assert list(o.iterdir()) == []
    assert '"ran":true' not in text(res) and (run / "latest").read_text() == "gone\n", text(res)[:300]
