"""Typed actions the policy layer can carry out, and how each is prepared and run for real.

`prepare` validates an action against the machine as it is now (the process exists, the
command file is inside the roots, the checkpoint is valid) and returns a `Prepared` action:
the exact text the person is shown, its risk inputs, how to undo it, and a fingerprint that
binds an approval to this action and nothing else (a changed argument, a recycled PID or an
edited command file gives another fingerprint). `run` does it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal as signals
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ml_skills.collectors.checkpoints import inspect_dir, inspect_file
from ml_skills.errors import InputError, PolicyError, TargetNotFound
from ml_skills.models import ActionKind, Model
from ml_skills.safety.paths import confine
from ml_skills.safety.redact import redact

SIGNALS = {"TERM": signals.SIGTERM, "INT": signals.SIGINT, "KILL": signals.SIGKILL, "HUP": signals.SIGHUP}


class KillProcess(Model):
    """Send a signal to one process by PID (a hung or runaway worker)."""

    kind: Literal["kill-worker"] = "kill-worker"
    pid: int = Field(ge=2, le=4_194_304, description="Process id to signal.")
    signal: Literal["TERM", "INT", "KILL", "HUP"] = Field("TERM", description="TERM lets the process clean up; KILL does not.")


class RestartUnchanged(Model):
    """Run the command recorded in a launch file again, exactly as written (no edits possible)."""

    kind: Literal["restart-unchanged"] = "restart-unchanged"
    command_file: str = Field(description="File holding the original launch command (command.txt, launch.sh), inside the allowed roots.")


class RepointCheckpoint(Model):
    """Point a resume pointer file at an existing, valid checkpoint."""

    kind: Literal["repoint-checkpoint"] = "repoint-checkpoint"
    pointer_file: str = Field(description="Resume pointer file to rewrite (e.g. 'latest', resume_from.txt), inside the allowed roots.")
    checkpoint: str = Field(description="Existing valid checkpoint file or directory, inside the allowed roots.")


class CancelPipeline(Model):
    """Cancel a running Vertex AI pipeline job."""

    kind: Literal["cancel-cloud-job"] = "cancel-cloud-job"
    job: str = Field(pattern=r"^projects/[A-Za-z0-9_-]{1,64}/locations/[a-z0-9-]{1,64}/pipelineJobs/[A-Za-z0-9_-]{1,128}$",
                     description="Full pipeline job resource name: projects/P/locations/L/pipelineJobs/ID.")


Action = Annotated[KillProcess | RestartUnchanged | RepointCheckpoint | CancelPipeline, Field(discriminator="kind")]


@dataclass
class Prepared:
    action: Model
    kind: ActionKind
    target: str
    summary: str
    impact: str
    undo: str
    manual: str = ""
    identity: dict[str, Any] = field(default_factory=dict)
    run: Callable[[], str] = field(default=lambda: "")

    @property
    def fingerprint(self) -> str:
        blob = json.dumps({"action": self.action.model_dump(mode="json"), "identity": self.identity}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    def arguments(self) -> dict[str, Any]:
        return self.action.model_dump(mode="json")


def prepare(action: Model, roots: Sequence[Path], out_dir: Path) -> Prepared:
    match action:
        case KillProcess():
            return _prepare_kill(action)
        case RestartUnchanged():
            return _prepare_restart(action, roots, out_dir)
        case RepointCheckpoint():
            return _prepare_repoint(action, roots)
        case CancelPipeline():
            return _prepare_cancel(action)
    raise InputError(f"unsupported action {action!r}")


def _prepare_kill(a: KillProcess) -> Prepared:
    import psutil

    if a.pid in (os.getpid(), os.getppid()):
        raise PolicyError(f"pid {a.pid} is this server or its client: refused")
    try:
        p = psutil.Process(a.pid)
        name, created = p.name(), p.create_time()
        try:
            cmd = redact(" ".join(p.cmdline()))[:300]
        except psutil.AccessDenied:
            cmd = "(command line not readable)"
    except psutil.NoSuchProcess:
        raise TargetNotFound(f"no process with pid {a.pid}: it may have ended already (`ps -p PID` confirms)") from None
    except psutil.AccessDenied:
        raise PolicyError(f"pid {a.pid} belongs to another user: not signalled") from None

    def run() -> str:
        q = psutil.Process(a.pid)
        if q.create_time() != created:
            raise PolicyError(f"pid {a.pid} is now a different process: nothing was signalled")
        q.send_signal(SIGNALS[a.signal])
        try:
            q.wait(timeout=3)
            return f"sent SIG{a.signal} to pid {a.pid} ({name}); it has exited"
        except psutil.TimeoutExpired:
            if q.status() == psutil.STATUS_ZOMBIE:
                return f"sent SIG{a.signal} to pid {a.pid} ({name}); it has exited (its parent has not reaped it yet)"
            return f"sent SIG{a.signal} to pid {a.pid} ({name}); it is still running after 3 s"

    return Prepared(
        action=a, kind=ActionKind.KILL_WORKER, target=f"pid:{a.pid}",
        summary=f"send SIG{a.signal} to pid {a.pid} ({name}): {cmd}",
        impact="the process stops; its work since the last checkpoint is lost" + ("; SIGKILL gives it no chance to save" if a.signal == "KILL" else ""),
        undo="cannot be undone; restart the run from its last valid checkpoint",
        manual=f"kill -{a.signal} {a.pid}", identity={"create_time": created, "name": name}, run=run,
    )


def _prepare_restart(a: RestartUnchanged, roots: Sequence[Path], out_dir: Path) -> Prepared:
    f = confine(a.command_file, roots)
    text = f.read_bytes()[:64 * 1024].decode("utf-8", errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if len(lines) != 1:
        raise InputError(f"{f} holds {len(lines)} command lines; restart-unchanged runs exactly one recorded command")
    try:
        argv = shlex.split(lines[0])
    except ValueError as e:
        raise InputError(f"{f}: the command cannot be split into arguments ({e})") from None
    if not argv:
        raise InputError(f"{f} holds no command")
    digest = hashlib.sha256(lines[0].encode()).hexdigest()

    def run() -> str:
        again = f.read_bytes()[:64 * 1024].decode("utf-8", errors="replace")
        if digest not in {hashlib.sha256(x.strip().encode()).hexdigest() for x in again.splitlines()}:
            raise PolicyError(f"{f} changed since the action was prepared: nothing was started")
        out_dir.mkdir(parents=True, exist_ok=True)
        log = out_dir / f"restart-{datetime.now(UTC):%Y%m%dT%H%M%S}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, cwd=f.parent, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        return f"started pid {proc.pid}: {redact(lines[0])[:300]} (output in {log})"

    return Prepared(
        action=a, kind=ActionKind.RESTART_UNCHANGED, target=str(f),
        summary=f"run again, unchanged, in {f.parent}: {redact(lines[0])[:500]}",
        impact="starts a new run with the recorded command; it uses the same resources as the original",
        undo="stop it with kill-worker on the pid this returns",
        manual=f"cd {shlex.quote(str(f.parent))} && {redact(lines[0])[:500]}", identity={"command_sha256": digest}, run=run,
    )


def _prepare_repoint(a: RepointCheckpoint, roots: Sequence[Path]) -> Prepared:
    pointer = confine(a.pointer_file, roots)
    ckpt = confine(a.checkpoint, roots, want="any")
    info = inspect_dir(ckpt) if ckpt.is_dir() else inspect_file(ckpt)
    if not info.valid:
        raise PolicyError(f"{ckpt} is not a valid checkpoint ({info.reason}): pick one list_artifacts reports valid")
    old = pointer.read_bytes()[:4096].decode("utf-8", errors="replace")
    new = str(ckpt) + "\n"

    def run() -> str:
        fd, tmp = tempfile.mkstemp(prefix=".repoint.", dir=pointer.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(new)
        os.replace(tmp, pointer)
        return f"{pointer} now points at {ckpt} (was: {old.strip()[:200] or 'empty'})"

    return Prepared(
        action=a, kind=ActionKind.REPOINT_CHECKPOINT, target=str(pointer),
        summary=f"rewrite {pointer} to point at {ckpt} (valid: {info.reason})",
        impact="the next resume starts from this checkpoint; nothing is deleted",
        undo=f"write the previous content back into {pointer}: {old.strip()[:200] or '(empty)'}",
        manual=f"echo {shlex.quote(str(ckpt))} > {shlex.quote(str(pointer))}", identity={"old_sha256": hashlib.sha256(old.encode()).hexdigest(), "checkpoint_mtime": info.mtime.isoformat()}, run=run,
    )


def _prepare_cancel(a: CancelPipeline) -> Prepared:
    region = a.job.split("/")[3]

    def run() -> str:
        from ml_skills.collectors import gcp  # google-cloud-aiplatform is imported only when an approved cancel runs

        api_endpoint = gcp.endpoint(gcp.VERTEX_ENV, f"{region}-aiplatform.googleapis.com")

        from google.cloud import aiplatform_v1

        def cancel(timeout: float) -> None:
            client = aiplatform_v1.PipelineServiceClient(credentials=gcp.credentials(api_endpoint), transport="rest",
                                                         client_options={"api_endpoint": api_endpoint})
            client.cancel_pipeline_job(name=a.job, timeout=timeout, retry=None)

        gcp.call(cancel, f"Vertex AI CancelPipelineJob for {a.job}", gcp.Deadline(), access="roles/aiplatform.user on the project",
                 not_found=f"no pipeline job {a.job}: check the name")
        return f"cancellation requested for {a.job}; Vertex AI stops its running tasks shortly"

    return Prepared(
        action=a, kind=ActionKind.CANCEL_CLOUD_JOB, target=a.job,
        summary=f"cancel the Vertex AI pipeline job {a.job}",
        impact="running tasks stop and their progress is lost; finished task outputs stay in the pipeline root",
        undo="cannot be undone; re-submit the pipeline (needs approval) to run it again",
        manual=f"python -c \"from google.cloud import aiplatform; aiplatform.PipelineJob.get('{a.job}').cancel()\"", run=run,
    )
