"""Issue 14's tenth round: attacks from outside on the surfaces new since round nine, the tracker stores a run directory
keeps beside its logs (an MLflow file store read without the SDK, W&B run folders, TensorBoard event files), and the
plugin cache.

Each test is one attack that broke a claim of docs/security.md, driven through the real CLI in a child process or a real
MCP client over stdio, with real files; each failed on the code before its fix (see docs/security.md, "Tenth round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text

pytestmark = pytest.mark.slow  # real child processes and servers


def _cli(run: Path, out: Path, limit: int | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`ml-skills check-failed-run RUN --format json` in a child process, under an address-space cap when given."""
    pre = None
    if limit is not None:
        import resource

        def pre() -> None:  # type: ignore[misc]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return subprocess.run([sys.executable, "-m", "ml_skills.cli", "check-failed-run", str(run), "--out-dir", str(out),
                           "--format", "json"], capture_output=True, text=True, timeout=timeout, preexec_fn=pre,
                          env=dict(os.environ), check=False)


def _mlflow_run(run: Path, run_id: str = "4f1c2a") -> Path:
    """A run folder with a short healthy log and an MLflow file store holding one finished run with a falling loss."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "train.log").write_text("".join(f"step {i} loss {1 / (i + 1):.4f}\n" for i in range(50)))
    r = run / "mlruns" / "1" / run_id
    (r / "metrics").mkdir(parents=True)
    (r / "params").mkdir()
    (r / "meta.yaml").write_text("status: 3\nrun_name: overnight\n")
    (r / "metrics" / "loss").write_text("".join(f"{1796205310759 + i} {1 / (i + 1)} {i}\n" for i in range(20)))
    return r


def _outside_folder(o: Path) -> None:
    """A folder outside the roots: its file names are what must never come back."""
    (o / "sub").mkdir(parents=True)
    (o / "payroll-2026-OUTSIDE.xlsx").write_text("1796205310759 1e30 4\n")
    (o / "sub" / "id_rsa-OUTSIDE").write_text("x\n")


def test_an_mlflow_store_whose_folders_link_out_of_the_run_never_names_the_files_outside(tmp_path: Path) -> None:
    """A run's `metrics` and `params` folders linked to a folder outside the run. Before: the store was listed through
    the link (`rglob`, `iterdir`), and every outside file's name, in every subfolder, came back in the notes, the
    report and `insufficient_evidence`, through the CLI and `diagnose` over MCP alike."""
    root, o = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    _outside_folder(o)
    first = _mlflow_run(root / "a")
    (first / "metrics" / "loss").unlink()
    (first / "metrics").rmdir()
    (first / "metrics").symlink_to(o, target_is_directory=True)
    second = _mlflow_run(root / "b")
    (second / "params").rmdir()
    (second / "params").symlink_to(o, target_is_directory=True)

    for run in (root / "a", root / "b"):
        proc = _cli(run, tmp_path / "out")
        assert proc.returncode == 0, proc.stderr
        report = (tmp_path / "out" / "check-failed-run.json").read_text()
        for shown in (proc.stdout, proc.stderr, report):
            assert "OUTSIDE" not in shown, shown[:2000]

    srv = Server(tmp_path, roots=[root])
    got: list[str] = []

    async def go() -> None:
        async with srv.client() as c:
            for run in (root / "a", root / "b"):
                res = await c.call_tool("diagnose", {"target": str(run), "out_dir": str(root / "out")})
                got.append(text(res) + json.dumps(res.structured_content))

    anyio.run(go)
    assert len(got) == 2 and all("overnight" in g or "mlflow" in g for g in got), got
    for g in got:
        assert "OUTSIDE" not in g, g[:2000]
    assert "OUTSIDE" not in srv.audit.read_text()


def _vm_after_importing(modules: str) -> int:
    probe = f"import {modules}; print(open('/proc/self/status').read().split('VmPeak:')[1].split()[0])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip()) * 1024


def test_an_mlflow_metric_file_of_millions_of_short_lines_is_read_in_bounded_memory_and_time(tmp_path: Path) -> None:
    """A 48 MiB `metrics/loss` of 12.6 million `1 1` lines. Before: read whole, decoded and split into a list of lines
    (1.3 GB and 31 s for 64 MiB, against 0.05 GB and 1.3 s for a 64 MiB log); now streamed, under one budget of bytes
    and lines per run, the rest named. The CLI runs under an address-space cap 384 MiB above what its imports need."""
    r = _mlflow_run(tmp_path / "run")
    with (r / "metrics" / "loss").open("w") as f:
        f.write("1 1\n" * (12 * 2**20))
    cap = _vm_after_importing("ml_skills.cli, ml_skills.engine.pipeline, ml_skills.collectors.runstores") + (384 << 20)
    t0 = time.monotonic()
    proc = _cli(tmp_path / "run", tmp_path / "out", limit=cap)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert took < 60, took
    assert "not read" in (tmp_path / "out" / "check-failed-run.json").read_text()  # the budget that bit is named


def _nest(top: Path, depth: int) -> Path:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("a", dir_fd=fd)
        nfd = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    with open(os.open("loss", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
        f.write("1796205310759 0.5 1\n")
    os.close(fd)
    return top


def _unnest(top: Path) -> None:
    """Remove a/a/a/... without recursion (shutil.rmtree recurses once per level)."""
    while (top / "a").is_dir():
        if (top / "a" / "a").is_dir():
            os.rename(top / "a" / "a", top / "b")
            for n in os.listdir(top / "a"):
                os.unlink(top / "a" / n)
            os.rmdir(top / "a")
            os.rename(top / "b", top / "a")
        else:
            for n in os.listdir(top / "a"):
                os.unlink(top / "a" / n)
            os.rmdir(top / "a")


def test_an_mlflow_metrics_folder_nested_1500_deep_never_ends_the_diagnosis(tmp_path: Path) -> None:
    """`metrics/a/a/.../a/loss`, 1,500 folders deep. Before: `rglob` recursed once per level and the CLI ended in
    "internal error: RecursionError", exit 3; now the store's keys are looked for 8 folders deep."""
    r = _mlflow_run(tmp_path / "run")
    _nest(r / "metrics", 1500)
    try:
        proc = _cli(tmp_path / "run", tmp_path / "out")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "internal error" not in proc.stderr
    finally:
        _unnest(r / "metrics")


def _fake(alphabet: str, n: int) -> str:
    import secrets

    return "".join(secrets.choice(alphabet) for _ in range(n))


def test_gitlab_npm_docker_google_oauth_and_databricks_tokens_never_leave(tmp_path: Path) -> None:
    """Token kinds "What is not promised" listed as kept (`glpat-`, `npm_`, `dckr_pat_`, `GOCSPX-`, Google `ya29.` and
    `1//` tokens, `dapi`, an `Authorization:` scheme other than Bearer, Basic, Token and Digest), printed by a real process into a run's log the way launch scripts echo them. Before: every one
    came back in clear from the CLI (text and JSON report) and from `read_log_tail` and `grep_log` over MCP."""
    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    tokens = [f"glpat-{_fake(alnum, 20)}", f"npm_{_fake(alnum, 36)}", f"dckr_pat_{_fake(alnum, 27)}", f"GOCSPX-{_fake(alnum, 28)}",
              f"ya29.a0{_fake(alnum, 120)}", f"1//0g{_fake(alnum, 100)}", f"dapi{_fake('0123456789abcdef', 32)}",
              f"k7{_fake(alnum, 30)}", f"00{_fake(alnum, 40)}"]
    lines = [f"export GITLAB_TOKEN {tokens[0]}", f"//registry.npmjs.org/:_authToken={tokens[1]}", f"docker login -p {tokens[2]}",
             f'{{"installed": {{"client_secret": "{tokens[3]}"}}}}', f"gcloud auth print-access-token -> {tokens[4]}",
             f"refresh {tokens[5]}", f"DATABRICKS_HOST=https://x.cloud.databricks.com DATABRICKS_TOKEN_{tokens[6]}",
             f"curl -H 'Authorization: ApiKey {tokens[7]}' https://es.internal:9200", f"Authorization: SSWS {tokens[8]}",
             "step 1 loss nan", "FloatingPointError: loss is nan"]
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    with (run / "train.log").open("w") as f:
        subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.argv[1:]))", *lines], stdout=f, check=True, timeout=60)
    proc = _cli(run, tmp_path / "out")
    shown = [proc.stdout, proc.stderr, (tmp_path / "out" / "check-failed-run.json").read_text()]
    srv = Server(tmp_path, roots=[tmp_path / "root"])

    async def go() -> None:
        async with srv.client() as c:
            for tool, args in (("read_log_tail", {"path": str(run / "train.log")}),
                               ("grep_log", {"path": str(run / "train.log"), "pattern": "."})):
                res = await c.call_tool(tool, args)
                shown.append(text(res) + json.dumps(res.structured_content))

    anyio.run(go)
    assert "[REDACTED]" in shown[-1]
    for t in tokens:
        for s in shown:
            assert t[-16:] not in s, (t, s[:1500])


_EVIL_C = """
#include <stdio.h>
__attribute__((constructor)) static void pwn(void) { FILE *f = fopen(MARK, "a"); if (f) { fputs("so ", f); fclose(f); } }
int OSSL_provider_init(void) { return 0; }
"""


@pytest.mark.skipif(not any(os.access(os.path.join(p, "gcc"), os.X_OK) for p in os.environ.get("PATH", "").split(os.pathsep)),
                    reason="needs gcc to build the planted library")
def test_a_recorded_command_never_sets_a_variable_that_makes_a_library_load_code_from_the_run_folder(tmp_path: Path) -> None:
    """`OPENSSL_CONF=ssl.cnf python train.py` reads as a launch with an SSL setting, and train.py is harmless (it imports
    `ssl`, as every HTTP client does: the Hub, W&B, MLflow). The config names a provider module in the run folder, a
    shared library OpenSSL loads as the interpreter's ssl starts. Before: after the accept its constructor ran; the
    ninth round refused GCONV_PATH and NCCL's plugin variables (libraries to load), not OpenSSL's. Now refused, with
    `OPENSSL_MODULES`, `OPENSSL_ENGINES`, plugin and tool-library variables; `OMP_NUM_THREADS=1` still runs."""
    from tests.mcp.conftest import answer
    from tests.security.test_ninth_round import _restarts, _wait_for

    r, o = tmp_path / "root", tmp_path / "outside"
    run = r / "run"
    run.mkdir(parents=True)
    o.mkdir()
    pwned = o / "PWNED"
    (run / "evil.c").write_text(_EVIL_C)
    subprocess.run(["gcc", "-shared", "-fPIC", f'-DMARK="{pwned}"', "-o", str(run / "libssl-prov.so"), str(run / "evil.c")],
                   check=True, timeout=120)
    (run / "ssl.cnf").write_text("openssl_conf = init\n[init]\nproviders = provs\n[provs]\nx = x_sect\n[x_sect]\n"
                                 f"module = {run / 'libssl-prov.so'}\nactivate = 1\n")
    (run / "modules.cnf").write_text("openssl_conf = init\n[init]\nproviders = provs\n[provs]\nx = x_sect\n[x_sect]\n"
                                     "module = libssl-prov.so\nactivate = 1\n")
    (run / "train.py").write_text(f"import ssl\nopen({str(o / 'REAL')!r}, 'a').write('ran\\n')\n")
    subprocess.run(["python", "train.py"], cwd=run, env={**os.environ, "OPENSSL_CONF": "ssl.cnf"}, check=True, timeout=60)
    assert pwned.exists()  # control: the planted library is live
    pwned.unlink()
    (o / "REAL").unlink()
    lines = ["OPENSSL_CONF=ssl.cnf python train.py", "OPENSSL_MODULES=. OPENSSL_CONF=modules.cnf python train.py",
             "OMP_TOOL_LIBRARIES=./libssl-prov.so python train.py", "OMP_NUM_THREADS=1 python train.py"]
    got = _restarts(Server(tmp_path, roots=[r]), run / "command.txt", lines, answer("accept"))
    _wait_for(o / "REAL")
    time.sleep(1)  # a refused launch that started anyway would have written its marker by now
    assert not pwned.exists(), (pwned.read_text(), got)
    assert all("error" in g or g.get("ran") is False for g in got[:3]), got
    assert got[3].get("ran") is True, got[3]


def test_a_link_out_of_the_roots_gets_one_answer_whether_its_target_exists_or_not(tmp_path: Path) -> None:
    """Links in the roots to `outside/payroll.xlsx` (there) and to `outside/board-minutes.pdf` (not there), a path given
    outside the roots, there and not. Before: "X resolves to /.../outside/payroll.xlsx, outside the allowed roots" against
    "nothing at X": where each link points, and whether a file of that name exists outside the roots ("What is not
    promised" listed it). Now one refusal, naming only the path given, over MCP for every tool that opens a path."""
    root, o = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    o.mkdir()
    (o / "payroll.xlsx").write_text("x\n")
    (root / "there.log").symlink_to(o / "payroll.xlsx")
    (root / "gone.log").symlink_to(o / "board-minutes.pdf")
    srv = Server(tmp_path, roots=[root])
    answers: dict[str, list[str]] = {}

    async def go() -> None:
        async with srv.client() as c:
            for tool, key in (("read_log_tail", "path"), ("inspect_checkpoint", "path"), ("grep_log", "path")):
                extra = {"pattern": "x"} if tool == "grep_log" else {}
                for name, path in (("there", root / "there.log"), ("gone", root / "gone.log"),
                                   ("given there", o / "payroll.xlsx"), ("given gone", o / "board-minutes.pdf")):
                    res = await c.call_tool(tool, {key: str(path), **extra})
                    answers.setdefault(tool, []).append(text(res).replace(str(path), "P"))

    anyio.run(go)
    for tool, got in answers.items():
        assert len(set(got)) == 1, (tool, got)  # the same refusal, the target there or not, a link or given
        assert "payroll" not in got[0] and "board-minutes" not in got[0] and "outside the allowed roots" in got[0], got[0]


def test_an_mlflow_run_of_tens_of_thousands_of_metric_files_reads_no_more_than_it_can_count(tmp_path: Path) -> None:
    """12,000 one-line metric files beside `loss`. Before: every one was opened and read (100,000 took 26 s against
    0.7 s for the same run without them; while streaming was being added, a 4 MiB buffer per file made it 5 minutes);
    names past the 10,000 the tracker counts were read for nothing. Now the loss, lr, grad-norm and validation series
    are read first, then up to 10,000 files, and the cap is named."""
    r = _mlflow_run(tmp_path / "run")
    for i in range(12_000):
        (r / "metrics" / f"layer{i}_act").write_text("1796205310759 0.5 1\n")
    t0 = time.monotonic()
    proc = _cli(tmp_path / "run", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    report = (tmp_path / "out" / "check-failed-run.json").read_text()
    assert "12,001 metric files, the first 10,000 read" in report
    assert "points read: loss 20" in report  # the loss series was read first
