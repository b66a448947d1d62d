"""Inspect a live (or just-ended) training process, read-only: is it busy, stalled, hung or gone?

A short sample (a few readings over ~1.5 s) gives CPU and RSS and their trend for the process
and its children; the regular files it holds open for writing are its logs, so their last write
time tells progress, and they are diagnosed like any log. Alive with no CPU and a silent log is
stalled; busy CPU with a silent log is hung (spinning, as ranks do waiting in a collective).
Its open files are paths read from data: only those inside the allowed roots are read (the
others are counted, not named), through the same confinement as any path.
Those findings go to the engine as source signals. The environment is never read: it is where
secrets live. Another user's process gives what /proc shows to everyone, and says what is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import psutil

from ml_skills.collectors import env_seconds, logfile
from ml_skills.errors import InputError, TargetNotFound
from ml_skills.models import (
    Anomaly,
    AnomalyKind,
    CollectRequest,
    EvidenceStatus,
    FailureClass,
    Progress,
    RawEvidence,
    RawLog,
    Severity,
    SourceEvidence,
)
from ml_skills.safety import paths
from ml_skills.safety.programs import child_env, find_program
from ml_skills.safety.quoting import argv_line
from ml_skills.safety.redact import redact, redact_cut

SAMPLE_SECONDS = 1.5
SAMPLES = 4
STALL_AFTER = 300.0  # seconds without a log write before an alive process counts as not progressing
IDLE_CPU = 2.0  # percent of one core: below this over the sample, the process is doing nothing
MAX_LOGS = 8
MAX_CHILDREN = 64
_WRITE_MODES = {"w", "a", "r+", "w+", "a+"}


@dataclass
class Reading:
    t: float
    cpu: float  # user+system seconds of the process and its children
    rss: int
    status: str


@dataclass
class Inspection:
    """Everything read about one process; `state` is the verdict the engine sees."""

    pid: int
    name: str = "?"
    user: str = "?"
    cmdline: str = ""
    started: float | None = None
    os_status: str = "?"
    state: str = "unknown"
    readings: list[Reading] = field(default_factory=list)
    threads: int | None = None
    children: list[str] = field(default_factory=list)
    logs: dict[str, float] = field(default_factory=dict)  # path -> mtime
    exit_code: int | None = None
    exit_signal: int | None = None
    gpu: str = ""
    checked_at: float = field(default_factory=time.time)  # when the log write times were last read
    missing: list[str] = field(default_factory=list)

    def cpu_percent(self) -> float | None:
        r = self.readings
        if len(r) < 2 or r[-1].t <= r[0].t:
            return None
        return 100.0 * (r[-1].cpu - r[0].cpu) / (r[-1].t - r[0].t)

    def cpu_series(self) -> list[float]:
        """CPU percent of one core in each interval between readings."""
        r = self.readings
        return [100.0 * (b.cpu - a.cpu) / (b.t - a.t) for a, b in pairwise(r) if b.t > a.t]

    def log_idle(self, now: float) -> float | None:
        return now - max(self.logs.values()) if self.logs else None


def _span(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


def _trend(values: list[float], tolerance: float) -> str:
    if len(values) < 2:
        return "too-short"
    delta = values[-1] - values[0]
    return "flat" if abs(delta) <= tolerance else "rising" if delta > 0 else "falling"


def _exit_status(pid: int) -> tuple[int | None, int | None]:
    """A zombie's exit status from /proc/PID/stat field 52 (the waitpid status): (code, signal)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2 :].split()
        status = int(fields[49])  # field 52; fields[0] is field 3 (state)
    except (OSError, ValueError, IndexError):
        return None, None
    return (None, status & 0x7F) if status & 0x7F else ((status >> 8) & 0xFF, None)


def _gpu(pids: set[int]) -> str:
    exe = find_program("nvidia-smi")
    if exe is None:
        return "nvidia-smi not found: GPU use unknown (no NVIDIA driver on this host, or not on an absolute entry of PATH)"
    try:
        run = subprocess.run([exe, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False, env=child_env())
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed ({type(e).__name__}): GPU use unknown"
    if run.returncode != 0:
        why = (run.stderr or run.stdout).strip().splitlines()
        return f"nvidia-smi failed (exit {run.returncode}: {redact_cut(why[0], 160) if why else 'no message'}): GPU use unknown"
    out = run.stdout
    used = [line.split(",") for line in out.splitlines() if line.strip()]
    mine = [(int(p), m.strip()) for p, m in used if p.strip().isdigit() and int(p) in pids]
    if not mine:
        return "no GPU memory held by this process or its children (nvidia-smi)"
    return ", ".join(f"pid {p}: {m} MiB" for p, m in mine)


def _written_logs(procs: list[psutil.Process], missing: list[str]) -> dict[str, float]:
    """Regular text files the processes hold open for writing, with their last write time."""
    logs: dict[str, float] = {}
    outside = 0
    for p in procs:
        try:
            files = p.open_files()
        except psutil.AccessDenied:
            missing.append(f"open files of pid {p.pid}: access denied (it belongs to another user): rerun as that user or root, "
                           "or pass its log path")
            continue
        except psutil.Error:
            continue
        for f in files:
            if f.mode not in _WRITE_MODES or f.path in logs or len(logs) >= MAX_LOGS:
                continue
            try:
                real = paths.contain(f.path, "file")
            except InputError:
                outside += 1
                continue
            try:
                st = os.stat(real)
                if st.st_size and not logfile.looks_binary(real):
                    logs[f.path] = st.st_mtime
            except (OSError, InputError):
                continue
    if outside:
        missing.append(f"{outside} file(s) it has open for writing are outside the allowed roots (or not regular files): "
                       "not read; start the server with --allow-root for that directory")
    return logs


def inspect(pid: int, *, sample_seconds: float = SAMPLE_SECONDS, samples: int = SAMPLES,
            stall_after: float = STALL_AFTER) -> Inspection:
    """Read the process over a short sample and decide busy, sleeping, stalled, hung, stopped, zombie or gone."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        raise TargetNotFound(f"no process with pid {pid}: it has ended (or never existed); diagnose its log instead: "
                             "ml-skills check-failed-run path/to/train.log") from None
    ins = Inspection(pid=pid)
    kids: list[psutil.Process] = []
    try:
        with proc.oneshot():
            ins.name, ins.os_status, ins.started = proc.name(), proc.status(), proc.create_time()
            ins.user = _try(proc.username, "user", ins.missing) or "?"
            if ins.os_status != psutil.STATUS_ZOMBIE:
                ins.cmdline = _command(proc, ins.missing)
                ins.threads = _try(proc.num_threads, "threads", ins.missing)
                kids = (_try(lambda: proc.children(recursive=True), "children", ins.missing) or [])[:MAX_CHILDREN]
    except psutil.NoSuchProcess:
        raise TargetNotFound(f"pid {pid} ended before it could be read; diagnose its log instead") from None
    if ins.os_status == psutil.STATUS_ZOMBIE:
        ins.state = "zombie"
        ins.exit_code, ins.exit_signal = _exit_status(pid)
        return ins
    ins.children = [f"{k.pid} {_try(k.name, '', []) or '?'}" for k in kids]
    ins.logs = _written_logs([proc, *kids], ins.missing)
    ins.gpu = _gpu({pid, *(k.pid for k in kids)})
    step = sample_seconds / max(1, samples - 1)
    for i in range(max(2, samples)):
        if i:
            time.sleep(step)
        try:
            ins.readings.append(_read(proc, kids))
        except psutil.ZombieProcess:
            ins.state, ins.os_status = "zombie", psutil.STATUS_ZOMBIE
            ins.exit_code, ins.exit_signal = _exit_status(pid)
            ins.missing.append(f"it exited during the {sample_seconds:g} s sample")
            return ins
        except psutil.NoSuchProcess:
            ins.state = "gone"
            ins.missing.append(f"it exited during the {sample_seconds:g} s sample (after {len(ins.readings)} reading(s)); "
                               "its exit code went to its parent")
            return ins
    if not ins.cmdline:  # read mid-exec (the kernel sets argv just after vfork returns): it is there by now
        ins.cmdline = _command(proc, [])
    for path in ins.logs:  # the write times as of the end of the sample
        try:
            ins.logs[path] = os.stat(path).st_mtime
        except OSError:
            pass
    ins.checked_at = time.time()
    ins.state = _verdict(ins, ins.checked_at, stall_after)
    return ins


def _command(proc: psutil.Process, missing: list[str]) -> str:
    """The command line, redacted, its words quoted as a shell would need them (`safety.quoting.argv_line`): joined with bare spaces, a
    secret holding spaces (`--db_password 'correct horse ...'`) lost the quotes that end its value, and only its first word
    was masked (fifty-seventh round); empty for a moment while the process execs."""
    try:
        return redact(argv_line(_try(proc.cmdline, "command line", missing) or []))[:1000]
    except psutil.NoSuchProcess:
        return ""


def _try(fn, what: str, missing: list[str]):
    try:
        return fn()
    except psutil.AccessDenied:
        if what:
            missing.append(f"{what}: access denied")
    except psutil.ZombieProcess:
        pass
    return None


def _read(proc: psutil.Process, kids: list[psutil.Process]) -> Reading:
    t = proc.cpu_times()
    cpu, rss = t.user + t.system, proc.memory_info().rss
    status = proc.status()
    if status == psutil.STATUS_ZOMBIE:
        raise psutil.ZombieProcess(proc.pid)
    for k in kids:
        try:
            kt = k.cpu_times()
            cpu += kt.user + kt.system
        except psutil.Error:
            continue
    return Reading(time.monotonic(), cpu, rss, status)


def _verdict(ins: Inspection, now: float, stall_after: float) -> str:
    if ins.readings[-1].status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
        return "stopped"
    cpu = ins.cpu_percent() or 0.0
    idle = ins.log_idle(now)
    if idle is not None and idle > stall_after:
        return "stalled" if cpu < IDLE_CPU else "hung"
    return "running" if cpu >= IDLE_CPU else "sleeping"


def signals(ins: Inspection, stall_after: float) -> list[Anomaly]:
    """What the verdict says to the engine: a class and a cause, naming the newest log with no line (the
    engine, which reads the log, pins it to its last line)."""
    newest = max(ins.logs, key=lambda p: ins.logs[p]) if ins.logs else None
    source, line_no = newest or f"process:{ins.pid}", None
    cpu = ins.cpu_percent() or 0.0
    idle = _span(ins.log_idle(ins.checked_at) or 0)
    name = Path(newest).name if newest else "its log"
    match ins.state:
        case "stalled":
            return [Anomaly(kind=AnomalyKind.NO_PROGRESS, failure_class=FailureClass.STALLED, severity=Severity.CRITICAL, source=source, line_no=line_no,
                            detail=f"alive but idle: {cpu:.1f}% CPU over the sample and {name} not written for {idle} "
                                   f"(threshold {_span(stall_after)}): blocked waiting (a peer rank, a data worker, a lock or I/O)")]
        case "hung":
            return [Anomaly(kind=AnomalyKind.SOURCE_SIGNAL, failure_class=FailureClass.STALLED, severity=Severity.CRITICAL, source=source, line_no=line_no,
                            detail=f"busy ({cpu:.0f}% CPU) but {name} not written for {idle}: spinning without progress, as ranks "
                                   "do busy-waiting in a collective, or an endless loop")]
        case "stopped":
            return [Anomaly(kind=AnomalyKind.SOURCE_SIGNAL, failure_class=FailureClass.STALLED, severity=Severity.CRITICAL, source=source, line_no=line_no,
                            detail=f"stopped by a signal (SIGSTOP, Ctrl-Z or a debugger): no progress until resumed (kill -CONT {ins.pid})")]
        case "zombie" if ins.exit_signal or ins.exit_code:
            how = (f"killed by {signal.Signals(ins.exit_signal).name}" if ins.exit_signal in signal.valid_signals() else f"killed by signal {ins.exit_signal}") \
                if ins.exit_signal else f"exited with code {ins.exit_code}"
            hint = ": SIGKILL often comes from the kernel OOM killer (dmesg -T | grep -i oom)" if ins.exit_signal == signal.SIGKILL else ""
            return [Anomaly(kind=AnomalyKind.SOURCE_SIGNAL, failure_class=FailureClass.PROCESS_CRASH, severity=Severity.CRITICAL,
                            source=f"process:{ins.pid}", detail=f"the process {how} and its parent has not reaped it (zombie){hint}")]
    return []


def find(name: str) -> int:
    """The training process among those matching NAME; an error listing them when it is unclear.

    Exact matches of the process name or a script's basename come before substring matches,
    python running a script before other programs, then a log open for writing, then CPU time.
    """
    if not name.strip() or len(name) > 200:
        raise InputError("--proc needs a process name or script name, e.g. --proc train.py")
    me = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "cpu_times", "username"]):
        info = p.info
        cmd = info["cmdline"] or []
        names = [info["name"] or "", *(os.path.basename(a) for a in cmd[:4])]
        if info["pid"] in me or not any(name in n for n in names):
            continue
        exact = name in names
        training = "python" in os.path.basename(cmd[0] if cmd else info["name"] or "") and any(a.endswith(".py") or a == "-m" for a in cmd[1:4])
        cpu = sum(info["cpu_times"][:2]) if info["cpu_times"] else 0.0
        writes = bool(_written_logs([p], [])) if training else False
        found.append((exact, training, writes, cpu, info["pid"], redact(argv_line(cmd) or info["name"] or "?")[:120]))
    if not found:
        raise TargetNotFound(f"no process matches '{name}': check `ps aux | grep {name}`, or pass --pid")
    pool = [f for f in found if f[0]] or found  # train.py itself before slow_train.py
    pool = [f for f in pool if f[1]] or pool  # python running a script before anything else
    pool.sort(key=lambda f: (f[2], f[3]), reverse=True)
    if len(pool) == 1 or (pool[0][2] and not pool[1][2]) or pool[0][3] >= 2 * pool[1][3] + 1:
        return pool[0][4]
    listed = "; ".join(f"pid {f[4]} ({f[5]}, {f[3]:.0f} s CPU)" for f in pool[:8])
    raise InputError(f"{len(pool)} processes match '{name}': {listed}: pass --pid with the one to check")


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    """The collector for --pid and --proc: the process's own evidence, and the logs it writes (newest first), unread."""
    pid = req.pid if req.pid is not None else find(req.proc or "")
    stall_after = env_seconds("ML_SKILLS_STALL_AFTER", STALL_AFTER)
    ins = inspect(pid, sample_seconds=env_seconds("ML_SKILLS_PROC_SAMPLE", SAMPLE_SECONDS, high=60), stall_after=stall_after)
    logs = [RawLog(source=path, path=path) for path in sorted(ins.logs, key=lambda p: -ins.logs[p])]
    return RawEvidence(source=evidence(ins, stall_after), logs=logs)


def evidence(ins: Inspection, stall_after: float) -> SourceEvidence:
    now = ins.checked_at
    cpu = ins.cpu_percent()
    facts = {"state": f"{ins.state} (os: {ins.os_status})"}
    if cpu is not None:
        facts["cpu"] = f"{cpu:.1f}% of one core over {ins.readings[-1].t - ins.readings[0].t:.1f} s, " \
                       f"per interval {', '.join(f'{x:.0f}%' for x in ins.cpu_series())}, trend {_trend(ins.cpu_series(), 15.0)}"
        rss = [r.rss for r in ins.readings]
        facts["rss"] = f"{rss[-1] / 2**20:.1f} MiB, trend {_trend([float(x) for x in rss], 2**20)}"
    if ins.logs:
        facts["logs written"] = ", ".join(f"{p} (last write {_span(now - m)} ago)" for p, m in sorted(ins.logs.items(), key=lambda t: -t[1]))
    elif ins.state == "zombie":
        ins.missing.append("a zombie has closed its files, so its log is not known here: pass the log path "
                           "(ml-skills check-failed-run path/to/train.log) to see why it exited")
    elif not any(m.startswith("open files of") for m in ins.missing):
        ins.missing.append("no log open for writing: its output goes to a pipe or terminal; pass the log path if there is one")
    if ins.exit_code is not None or ins.exit_signal is not None:
        facts["exit"] = f"signal {ins.exit_signal}" if ins.exit_signal else f"code {ins.exit_code}"
    facts["command"] = ins.cmdline or ins.name
    if ins.started:
        facts["age"] = _span(now - ins.started)
    facts["user"] = ins.user
    if ins.threads is not None:
        facts["threads"] = str(ins.threads)
    facts["children"] = ", ".join(ins.children[:8]) + (f" (+{len(ins.children) - 8})" if len(ins.children) > 8 else "") or "none"
    if ins.gpu:
        facts["gpu"] = ins.gpu
    status = EvidenceStatus.PARTIAL if ins.missing or ins.state == "gone" else EvidenceStatus.OK
    report = [f"Process: pid {ins.pid} {ins.name}, {ins.state} (os: {ins.os_status}), user {ins.user}"
              + (f", up {facts['age']}" if "age" in facts else "")]
    return SourceEvidence(
        kind="process", name=str(ins.pid), status=status, state=ins.state,
        facts={k: redact(v) for k, v in facts.items()}, report_lines=report, missing=[redact(m) for m in ins.missing],
        signals=signals(ins, stall_after),
        details={"readings": [{"t": round(r.t - ins.readings[0].t, 3), "cpu_s": round(r.cpu, 3), "rss": r.rss, "status": r.status} for r in ins.readings],
                 "exit_code": ins.exit_code, "exit_signal": ins.exit_signal},
    )
