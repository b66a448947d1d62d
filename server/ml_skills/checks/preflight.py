"""preflight-run: the cheap screens before a paid run.

Each screen is a function returning a Check. They read the script (AST, never executed except
in the explicit smoke and probe runs), the data directory, and the results archive; the smoke
and probe runs are real child processes on the CPU with a deadline. The gate fails closed on
the screens that lose a run outright: a script that does not compile, a failing smoke run, a
data directory still being written, an eager load that cannot fit, a budget over the cap with
no checkpointing.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ml_skills.checks.report import Check, CheckReport, Verdict
from ml_skills.errors import InputError, MLSkillsError, PathNotAllowed, TargetNotFound
from ml_skills.safety import paths

SAVE_CALLS = re.compile(r"^(save|save_model|save_checkpoint|save_pretrained|save_state|save_weights|_save|dump|save_file)$")
RESUME_WORDS = re.compile(r"(?i)(resume|load_state_dict|load_checkpoint|from_checkpoint|restore|ckpt_path)")
DETACH = re.compile(r"\b(nohup|setsid|tmux|screen|sbatch|systemd-run|disown|kubectl|gcloud ai custom-jobs|docker run -d)\b")
TEMP_NAMES = re.compile(r"(?i)(\.tmp$|\.partial$|\.incomplete$|\.part$|~$|^\.)")
IMAGE_EXT = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")


def _calls(tree: ast.AST) -> list[tuple[ast.Call, list[ast.AST]]]:
    """Every call with the chain of enclosing nodes (to know whether it sits in a loop or handler)."""
    out: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Call):
            out.append((node, parents))
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    return out


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


MAX_SCRIPT_BYTES = 16 * 1024 * 1024


def _script_text(script: Path, errors: str = "replace") -> str:
    """The script's source, opened confined and read bounded (a FIFO swapped in is refused, not waited on)."""
    return paths.read_capped(script, MAX_SCRIPT_BYTES).decode("utf-8", errors=errors)


def compile_check(script: Path) -> tuple[Check, ast.AST | None]:
    try:
        source = _script_text(script, errors="strict")
        compile(source, str(script), "exec")  # byte-compiles in memory: nothing is written
        tree = ast.parse(source, filename=str(script))
    except (SyntaxError, UnicodeDecodeError, ValueError) as e:
        return Check(name="compile", verdict=Verdict.FAIL, detail=str(e).splitlines()[-1][:300], fix="fix the syntax error"), None
    except (MemoryError, RecursionError):  # the parser's answer to nesting too deep (200,000 unary minuses): a verdict, not a crash
        return Check(name="compile", verdict=Verdict.FAIL, detail="the script is nested too deeply for Python to compile it",
                     fix="split the deeply nested expression"), None
    missing = []
    local = {p.stem for p in script.parent.glob("*.py")} | {p.name for p in script.parent.iterdir() if p.is_dir()}
    for node in ast.walk(tree):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods = [node.module.split(".")[0]]
        for m in mods:
            if m not in local and importlib.util.find_spec(m) is None:
                missing.append(m)
    if missing:
        return Check(name="compile", verdict=Verdict.FAIL, detail=f"compiles, but cannot import: {', '.join(sorted(set(missing)))}",
                     fix="install the missing packages in the run's environment"), tree
    return Check(name="compile", verdict=Verdict.PASS, detail="compiles and every import resolves"), tree


def _has_resume(tree: ast.AST) -> bool:
    """A resume path in code (not in comments or docstrings): a checkpoint load, or a resume flag."""
    for call, _ in _calls(tree):
        name = _name(call)
        if name in ("load_state_dict", "load_checkpoint", "resume_from_checkpoint", "restore", "load_from_checkpoint"):
            return True
        if name == "add_argument" and any(isinstance(a, ast.Constant) and isinstance(a.value, str) and RESUME_WORDS.search(a.value) for a in call.args):
            return True
        if any(k.arg and RESUME_WORDS.search(k.arg) for k in call.keywords):
            return True
    return False


def checkpoint_check(tree: ast.AST | None, source: str) -> Check:
    if tree is None:
        return Check(name="checkpointing", verdict=Verdict.SKIP, detail="script did not parse")
    periodic = on_failure = False
    for call, parents in _calls(tree):
        if not SAVE_CALLS.match(_name(call)):
            continue
        if any(isinstance(p, (ast.For, ast.While, ast.AsyncFor)) for p in parents):
            periodic = True
        if any(isinstance(p, (ast.ExceptHandler,)) or (isinstance(p, ast.Try) and p.finalbody and any(call in ast.walk(s) for s in p.finalbody)) for p in parents):
            on_failure = True
        if any(isinstance(p, ast.FunctionDef) and any(isinstance(c, ast.Call) and _name(c) == "signal" for c in ast.walk(tree)) for p in parents):
            on_failure = on_failure or bool(re.search(r"signal\.signal\(\s*signal\.SIG(TERM|INT|USR1)", source))
    trainer_managed = bool(re.search(r"(save_steps|save_strategy|ModelCheckpoint|every_n_train_steps|checkpoint_interval|save_interval)", source))
    resume = _has_resume(tree)
    periodic = periodic or trainer_managed
    problems = []
    if not periodic:
        problems.append("no periodic checkpoint (a save inside the training loop, save_steps, ModelCheckpoint)")
    if not resume:
        problems.append("no resume path (resume flag, load_state_dict of a checkpoint)")
    if not on_failure and not trainer_managed:
        problems.append("no save on failure (a save in except/finally or a SIGTERM handler)")
    if problems:
        return Check(name="checkpointing", verdict=Verdict.FAIL, detail="; ".join(problems),
                     fix="save every N steps and on failure/SIGTERM, and accept a resume path, so a killed run loses minutes, not days")
    return Check(name="checkpointing", verdict=Verdict.PASS, detail="periodic saves, a resume path" + (", save on failure" if on_failure else " (trainer-managed)"))


def run_check(name: str, script: Path, args: list[str], timeout: float, log_path: Path | None) -> tuple[Check, str, float]:
    """Run the script for real on the CPU; returns the check, its output and the wall time."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, str(script), *args], cwd=script.parent, env=env, capture_output=True,
                              text=True, timeout=timeout, errors="replace", check=False)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or "") if isinstance(e.stdout, str) else (e.stdout or b"").decode("utf-8", "replace")
        return Check(name=name, verdict=Verdict.FAIL, detail=f"did not finish within {timeout:g}s",
                     fix="make the smoke arguments smaller (few steps, tiny data)"), out, timeout
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    if log_path is not None:  # kept for the person, in --out-dir: the only write preflight makes besides its report
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(out)
    if proc.returncode != 0:
        from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

        d = diagnose(DiagnoseRequest(traceback_text=out[-200_000:]))
        cause = f"{d.primary_cause.value}: {d.root_cause.proximate[:200]}" if d.primary_cause else out.strip().splitlines()[-1:] or ["no output"]
        return Check(name=name, verdict=Verdict.FAIL, detail=f"exit {proc.returncode}; {cause}",
                     fix=d.fixes[0].action if d.fixes else "fix the failure before paying for the run"), out, wall
    return Check(name=name, verdict=Verdict.PASS, detail=f"exit 0 in {wall:.1f}s on the CPU"), out, wall


def throughput_check(out: str, samples_per_step: int | None, total_samples: int | None, epochs: float,
                     cost_per_hour: float | None, cap_hours: float | None, checkpointing_ok: bool) -> tuple[Check, dict[str, str]]:
    """Seconds per 1,000 samples measured between progress lines of the probe (startup excluded)."""
    from ml_skills.engine import metrics

    points = []
    t0 = None
    for line in out.splitlines():
        parsed = metrics.parse_line(line)
        ts = metrics.parse_timestamp(line)
        if parsed and parsed[1] is not None:
            points.append((parsed[1], ts, time.monotonic()))
        t0 = t0 or ts
    stamped = [(s, ts) for s, ts, _ in points if ts is not None]
    facts: dict[str, str] = {}
    if len(stamped) < 2 or not samples_per_step:
        return Check(name="throughput", verdict=Verdict.SKIP,
                     detail="probe printed fewer than two timestamped step lines, or --samples-per-step not given",
                     fix="log 'YYYY-mm-dd HH:MM:SS step N ...' lines and pass --samples-per-step"), facts
    (s0, a), (s1, b) = stamped[0], stamped[-1]
    seconds = (b - a).total_seconds()
    samples = (s1 - s0) * samples_per_step
    if samples < 1000 or seconds <= 0:
        return Check(name="throughput", verdict=Verdict.FAIL,
                     detail=f"the probe measured only {samples:g} samples over {seconds:g}s: need at least 1,000 for a budget",
                     fix="raise the probe's steps so it processes at least 1,000 samples"), facts
    per_1k = seconds / samples * 1000
    facts["seconds_per_1000_samples"] = f"{per_1k:.3f}"
    detail = f"{per_1k:.2f}s per 1,000 samples (measured over {samples:g} samples)"
    if total_samples:
        hours = per_1k * total_samples * epochs / 1000 / 3600
        facts["budget_hours"] = f"{hours:.2f}"
        detail += f"; full run {hours:.2f} h"
        if cost_per_hour:
            facts["budget_cost"] = f"{hours * cost_per_hour:.2f}"
            detail += f", cost {hours * cost_per_hour:.2f}"
        if cap_hours and hours > cap_hours and not checkpointing_ok:
            return Check(name="throughput", verdict=Verdict.FAIL, detail=detail + f" > platform cap {cap_hours:g} h, and the script cannot resume",
                         fix="add checkpoint-and-resume, or shrink the run below the cap"), facts
        if cap_hours and hours > cap_hours:
            return Check(name="throughput", verdict=Verdict.WARN, detail=detail + f" > platform cap {cap_hours:g} h: it will be cut and must resume"), facts
    return Check(name="throughput", verdict=Verdict.PASS, detail=detail), facts


def _plain_files(data: Path) -> tuple[list[Path], int]:
    """The dataset's files, and how many symlinks were not followed: a link is followed only to a file inside the
    allowed roots (safety/paths.contain). Following every link made the shard count, the fresh and the empty files
    an oracle on any file of the machine (`shard-9.bin -> /home/x/.ssh/id_rsa`: counted when it exists)."""
    files: list[Path] = []
    unfollowed = 0
    for p in data.rglob("*"):
        if p.is_symlink():
            try:
                real = paths.contain(p, "any")
            except MLSkillsError:
                unfollowed += 1
                continue
            if real.is_file():
                files.append(p)  # under its own name
        elif p.is_file():
            files.append(p)
    return files, unfollowed


def completeness_check(data: Path, expect_shards: int | None, marker: str | None, pattern: str, quiet_seconds: float) -> Check:
    if not data.is_dir():
        return Check(name="input completeness", verdict=Verdict.FAIL, detail=f"no data directory at {data}", fix="point --data at the dataset")
    files, unfollowed = _plain_files(data)
    shards = [p for p in files if p.match(pattern) and not TEMP_NAMES.search(p.name)]
    temps = [p.name for p in files if TEMP_NAMES.search(p.name) and p.name != marker]
    now = time.time()
    fresh = [p.name for p in files if now - p.stat().st_mtime < quiet_seconds]
    problems = []
    if temps:
        problems.append(f"temporary files present ({', '.join(sorted(temps)[:3])}): a producer is still writing")
    if fresh:
        problems.append(f"{len(fresh)} file(s) modified in the last {quiet_seconds:g}s ({', '.join(sorted(fresh)[:3])})")
    if expect_shards is not None and len(shards) != expect_shards:
        problems.append(f"{len(shards)} shard(s) matching {pattern!r}, expected {expect_shards}")
    if marker:
        try:  # looked up below `data` through held fds, no link followed: never a probe of files elsewhere
            present = paths.exists_below(data, marker)
        except PathNotAllowed:
            problems.append(f"completion marker {marker!r} refused: give a name inside the data directory "
                            "(relative, no '..'); it was not looked up")
        else:
            if not present:
                problems.append(f"completion marker {marker} is missing")
    empty = [p.name for p in shards if p.stat().st_size == 0]
    if empty:
        problems.append(f"empty shard(s): {', '.join(empty[:3])}")
    if unfollowed:  # one count for dangling links and links out of the roots: the answer says nothing of files elsewhere
        problems.append(f"{unfollowed} symlink(s) in the data directory were not followed (dangling, or out of the allowed "
                        "roots): copy the files in, or allow their directory")
    if problems:
        return Check(name="input completeness", verdict=Verdict.FAIL, detail="; ".join(problems),
                     fix="wait for the producer to finish (completion marker written last), then start; assert the shard count in the trainer too")
    return Check(name="input completeness", verdict=Verdict.PASS, detail=f"{len(shards)} shard(s), stable for {quiet_seconds:g}s" + (f", marker {marker}" if marker else ""))


def memory_check(data: Path, bytes_per_value: int, limit: int | None) -> tuple[Check, dict[str, str]]:
    """Decoded size of an image dataset (from headers, without decoding) against the memory limit."""
    try:
        from PIL import Image
    except ImportError:
        return Check(name="memory budget", verdict=Verdict.SKIP, detail="Pillow not installed"), {}
    total = 0
    count = 0
    for p in data.rglob("*"):
        if p.suffix.lower() in IMAGE_EXT and p.is_file():
            try:
                with paths.open_binary(p) as fh, Image.open(fh) as im:
                    total += im.width * im.height * len(im.getbands()) * bytes_per_value
                    count += 1
            except Exception:  # noqa: BLE001, S112 - a corrupt image is the data check's business
                continue
    if count == 0:
        return Check(name="memory budget", verdict=Verdict.SKIP, detail="no images to size"), {}
    if limit is None:
        import psutil

        limit = psutil.virtual_memory().available
    facts = {"decoded_dataset_bytes": str(total), "memory_limit_bytes": str(limit)}
    detail = f"{count} images decode to {total / 2**30:.2f} GiB; memory limit {limit / 2**30:.2f} GiB"
    if total > 0.8 * limit:
        return Check(name="memory budget", verdict=Verdict.FAIL, detail=detail + ": loading them eagerly will be OOM-killed (exit 137)",
                     fix="decode lazily per batch in Dataset.__getitem__ (or memory-map), never the whole set up front"), facts
    return Check(name="memory budget", verdict=Verdict.PASS, detail=detail), facts


def launch_check(launch: str | None, cap_hours: float | None) -> Check:
    if not launch:
        return Check(name="detached launch", verdict=Verdict.SKIP, detail="no --launch command given")
    problems = []
    if not DETACH.search(launch):
        problems.append("not detached (nohup/setsid/tmux/sbatch/...): a closed terminal kills the run")
    m = re.search(r"\btimeout\s+(?:-\S+\s+)*(\d+(?:\.\d+)?)([smhd]?)\b|--time[= ](\d+):(\d+):(\d+)", launch)
    hours = None
    if m and m.group(1):
        hours = float(m.group(1)) * {"": 1 / 3600, "s": 1 / 3600, "m": 1 / 60, "h": 1, "d": 24}[m.group(2)]
    elif m and m.group(3):
        hours = int(m.group(3)) + int(m.group(4)) / 60
    if cap_hours:
        if hours is None:
            problems.append(f"no timeout: the platform's {cap_hours:g} h cap will kill it without warning")
        elif hours >= cap_hours:
            problems.append(f"timeout {hours:g} h is not shorter than the platform cap {cap_hours:g} h")
    if problems:
        return Check(name="detached launch", verdict=Verdict.FAIL, detail="; ".join(problems),
                     fix="launch detached, with a timeout shorter than the cap, and save on the timeout's SIGTERM")
    return Check(name="detached launch", verdict=Verdict.PASS, detail="detached" + (f", timeout {hours:g} h" if hours else ""))


def config_fingerprint(script: Path, args: list[str]) -> str:
    return hashlib.sha256((script.name + "\0" + " ".join(args)).encode()).hexdigest()[:16]


def archive_check(archive: Path | None, script: Path, args: list[str]) -> Check:
    if archive is None:
        return Check(name="results archive", verdict=Verdict.SKIP, detail="no --results-archive given")
    if not archive.is_dir():
        return Check(name="results archive", verdict=Verdict.FAIL, detail=f"no archive at {archive}", fix="point at the results archive")
    wanted = " ".join(args)
    for cmd_file in list(archive.rglob("command.txt"))[:10_000]:
        try:
            recorded = paths.read_capped(cmd_file, 64 * 1024).decode("utf-8", errors="replace")
        except (OSError, InputError):
            continue
        if script.name in recorded and wanted and wanted in recorded:
            return Check(name="results archive", verdict=Verdict.FAIL, detail=f"already run: {cmd_file.parent} has the same command",
                         fix="read that result first; re-run only on purpose")
    return Check(name="results archive", verdict=Verdict.PASS, detail=f"no earlier run with this command in {archive}")


def _size(text: str) -> int:
    m = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text)
    if not m:
        raise InputError(f"cannot read size {text!r}: use e.g. 16G or 512M")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


@dataclass(frozen=True, kw_only=True)
class PreflightOptions:
    """What preflight-run screens and with which limits: one object, so the CLI and the MCP tool say only what they set.

    The defaults are the CLI's. `None` leaves a screen out (no smoke run, no data directory, no cap...).
    """

    script: str
    args: list[str] = field(default_factory=list)
    smoke_args: list[str] | None = None
    probe_args: list[str] | None = None
    samples_per_step: int | None = None
    total_samples: int | None = None
    epochs: float = 1.0
    cost_per_hour: float | None = None
    cap_hours: float | None = None
    data: str | None = None
    expect_shards: int | None = None
    marker: str | None = None
    shard_pattern: str = "*"
    quiet_seconds: float = 60.0
    memory_limit: str | None = None
    decode_bytes: int = 1
    launch: str | None = None
    results_archive: str | None = None
    timeout: float = 600.0
    out_dir: str | None = None


def preflight(o: PreflightOptions) -> CheckReport:
    s = Path(o.script)
    if not s.is_file():
        raise TargetNotFound(f"no training script at {s}")
    checks: list[Check] = []
    required = {"compile", "checkpointing"}
    comp, tree = compile_check(s)
    checks.append(comp)
    source = _script_text(s)
    ck = checkpoint_check(tree, source)
    checks.append(ck)
    facts: dict[str, str] = {"fingerprint": config_fingerprint(s, o.args)}
    if o.smoke_args is not None and comp.verdict is Verdict.PASS:
        c, _, _ = run_check("smoke run", s, o.smoke_args, o.timeout, Path(o.out_dir) / "preflight-smoke.log" if o.out_dir else None)
        checks.append(c)
        required.add("smoke run")
    if o.probe_args is not None and comp.verdict is Verdict.PASS:
        c, out, _ = run_check("throughput probe run", s, o.probe_args, o.timeout, None)
        if c.verdict is Verdict.PASS:
            c, f = throughput_check(out, o.samples_per_step, o.total_samples, o.epochs, o.cost_per_hour, o.cap_hours,
                                    ck.verdict is Verdict.PASS)
            facts.update(f)
        checks.append(c)
        required.add(c.name)
    if o.data is not None:
        checks.append(completeness_check(Path(o.data), o.expect_shards, o.marker, o.shard_pattern, o.quiet_seconds))
        required.add("input completeness")
        mc, f = memory_check(Path(o.data), o.decode_bytes, _size(o.memory_limit) if o.memory_limit else None)
        checks.append(mc)
        facts.update(f)
        required.add("memory budget")
    checks.append(launch_check(o.launch, o.cap_hours))
    if o.launch:
        required.add("detached launch")
    checks.append(archive_check(Path(o.results_archive) if o.results_archive else None, s, o.args))
    if o.results_archive:
        required.add("results archive")
    required = {r for r in required if any(c.name == r and c.verdict is not Verdict.SKIP for c in checks)} | {"compile"}
    return CheckReport.gate("preflight-run", f"{s} {shlex.join(o.args)}".strip(), checks, required, facts)
