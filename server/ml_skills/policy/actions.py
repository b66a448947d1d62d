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
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ml_skills.errors import InputError, PolicyError, TargetNotFound
from ml_skills.models import ActionKind, Model
from ml_skills.policy import clients
from ml_skills.policy.folder_routes import folder_routes, shim_pin, version_file_routes
from ml_skills.policy.launcher_options import rendezvous
from ml_skills.policy.prepared import Prepared, held_dir
from ml_skills.policy.quoting import QUOTED_LIMIT, decoded, masked, named_outside_ascii, quoted
from ml_skills.policy.repoint import RepointCheckpoint, prepare_repoint
from ml_skills.policy.restart_command import MAX_SHOWN_COMMAND, _recorded_command
from ml_skills.policy.restart_env import sends_elsewhere
from ml_skills.safety.paths import confine, open_out_dir
from ml_skills.safety.programs import child_env
from ml_skills.safety.quoting import argv_line
from ml_skills.safety.redact import redact

SIGNALS = {"TERM": signals.SIGTERM, "INT": signals.SIGINT, "KILL": signals.SIGKILL, "HUP": signals.SIGHUP}


class KillProcess(Model):
    """Send a signal to one process by PID (a hung or runaway worker)."""

    kind: Literal["kill-worker"] = "kill-worker"
    pid: int = Field(ge=2, le=4_194_304, description="Process id to signal.")
    signal: Literal["TERM", "INT", "KILL", "HUP"] = Field("TERM", description="TERM lets the process clean up; KILL does not.")


class RestartUnchanged(Model):
    """Run the command a launcher recorded again, exactly as written (no edits possible); always asks the person."""

    kind: Literal["restart-unchanged"] = "restart-unchanged"
    command_file: str = Field(description="The launcher's record of the original command (command.txt, cmd.txt or command: one line "
                                          "starting with python or torchrun; accelerate, deepspeed, srun, mpirun and horovodrun are refused), "
                                          "inside the allowed roots. Scripts and other files are refused.")


class CancelPipeline(Model):
    """Cancel a running Vertex AI pipeline job."""

    kind: Literal["cancel-cloud-job"] = "cancel-cloud-job"
    job: str = Field(pattern=r"^projects/[A-Za-z0-9_-]{1,64}/locations/[a-z0-9-]{1,64}/pipelineJobs/[A-Za-z0-9_-]{1,128}$",
                     description="Full pipeline job resource name: projects/P/locations/L/pipelineJobs/ID.")


Action = Annotated[KillProcess | RestartUnchanged | RepointCheckpoint | CancelPipeline, Field(discriminator="kind")]


def prepare(action: Model, roots: Sequence[Path], out_dir: Path) -> Prepared:
    match action:
        case KillProcess():
            return _prepare_kill(action)
        case RestartUnchanged():
            return _prepare_restart(action, roots, out_dir)
        case RepointCheckpoint():
            return prepare_repoint(action, roots, out_dir)
        case CancelPipeline():
            return _prepare_cancel(action)
    raise InputError(f"unsupported action {action!r}")


def _ours(pid: int) -> bool:
    """Whether `pid` is this server or its client, by its process id or the id of any of its threads: kill(2) on a thread's
    id signals the whole process (sixteenth round: a server worker thread's id passed the pid check, and after an accept the
    server ended itself, leaving a `starting` entry with no outcome). The client is any ancestor: a server started through a
    wrapper (`sh -c`, `uv run`) has the wrapper as its parent and the client above it (sixteenth round too)."""
    import psutil

    try:
        chain = [psutil.Process(), *psutil.Process().parents()]
    except psutil.Error:
        chain = []
    for own in [os.getpid(), os.getppid(), *(p.pid for p in chain)]:
        if pid == own:
            return True
        try:
            if pid in {t.id for t in psutil.Process(own).threads()}:
                return True
        except psutil.Error:
            continue
    return clients.is_client(pid)  # a client that is no ancestor (HTTP, a forwarder, setsid -f)


def _thread_group(pid: int) -> int | None:
    """The process a task id belongs to (its `Tgid`), or None when it cannot be read. kill(2) on a thread's id signals its
    whole process: before the nineteenth round `kill-worker` on a thread of another process asked about "pid N (process name
    'harmless-sleep')", the name the process gave that thread, and the process (another pid, another name) ended."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _refuse_thread(pid: int, then: str) -> None:
    tgid = _thread_group(pid)
    if tgid is not None and tgid != pid:
        raise PolicyError(f"{pid} is the id of a thread of process {tgid}, not a process: a signal to it ends process {tgid}"
                          f"{then}; ask for pid {tgid} if that process is meant")


def _program(p: Any) -> tuple[str, str | None, tuple[str, ...] | None]:
    """What a process runs: its name, executable and command line (None where they cannot be read)."""
    import psutil

    def read(get: Callable[[], Any]) -> Any:
        try:
            return get()
        except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
            return None

    return p.name(), read(p.exe), (tuple(c) if (c := read(p.cmdline)) is not None else None)


def _prepare_kill(a: KillProcess) -> Prepared:
    import psutil

    if _ours(a.pid):
        raise PolicyError(f"pid {a.pid} is this server or its client: refused")
    _refuse_thread(a.pid, ": refused")
    try:
        p = psutil.Process(a.pid)
        name, created = p.name(), p.create_time()
        program = _program(p)
        try:
            cmd = redact(argv_line(p.cmdline()))[:1000]  # quoted: a secret holding spaces is masked whole (fifty-seventh round)
        except psutil.AccessDenied:
            cmd = "(command line not readable)"
    except psutil.NoSuchProcess:
        raise TargetNotFound(f"no process with pid {a.pid}: it may have ended already (`ps -p PID` confirms)") from None
    except psutil.AccessDenied:
        raise PolicyError(f"pid {a.pid} belongs to another user: not signalled") from None

    def run() -> str:
        q = psutil.Process(a.pid)
        if _ours(a.pid):  # a worker thread started since the question
            raise PolicyError(f"pid {a.pid} is this server or its client: nothing was signalled")
        if q.create_time() != created:
            raise PolicyError(f"pid {a.pid} is now a different process: nothing was signalled")
        if _program(q) != program:  # exec keeps the pid and its start time (seventy-fourth round: a 'python train_worker'
            # became 'sleep', renamed 'postgres: checkpointer', while the person read the question, and got the signal)
            raise PolicyError(f"pid {a.pid} now runs another program than the question named (process name "
                              f"{quoted(q.name(), 100)}): nothing was signalled; ask again if it is still meant")
        _refuse_thread(a.pid, ": nothing was signalled")
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
        summary=f"send SIG{a.signal} to pid {a.pid} (process name {quoted(name, 100)}, command line {quoted(cmd, 300)})",
        impact="the process stops; its work since the last checkpoint is lost" + ("; SIGKILL gives it no chance to save" if a.signal == "KILL" else ""),
        undo="cannot be undone; restart the run from its last valid checkpoint",
        manual=f"kill -{a.signal} {a.pid}", run=run,
        # the program is bound too: a client answering on the stateless protocol sends the request again, and the action is
        # prepared anew; a process that rewrote its command line in place meanwhile (setproctitle, no exec) was prepared
        # with its new one and signalled unasked (seventy-sixth round). Hashed: a command line may hold a secret.
        identity={"create_time": created, "name": name, "program": hashlib.sha256(json.dumps(program).encode()).hexdigest()},
    )


def _restart_impact(env: dict[str, str], argv: list[str], files: list[str]) -> str:
    """A restart's "Expected impact": the resources, and every way the question knows of that the run sends its credentials
    or data to a host the line or the folder names (variables, a launcher's options, rendezvous hosts, settings files)."""
    routes = sends_elsewhere(list(env)) + rendezvous(argv, env)
    return ("starts a new run with the recorded command; it uses the same resources (GPUs, nodes, a paid job) as the original"
            + (f"; it sets {', '.join(routes)}, so the run sends its credentials (W&B key, Hugging Face token, ...) and data "
               "where the command points them, not to the usual hosts" if routes else "")
            + "".join("; " + clause for clause in files))


def _prepare_restart(a: RestartUnchanged, roots: Sequence[Path], out_dir: Path) -> Prepared:
    f = confine(a.command_file, roots)
    dfd = held_dir(f, roots)
    try:
        line, env, argv, program = _recorded_command(f, dfd)
        files = folder_routes(dfd) + version_file_routes(f.parent, program, roots)
        pin = shim_pin(f.parent, program, roots)
    finally:
        os.close(dfd)
    digest = hashlib.sha256(line.encode()).hexdigest()

    def run() -> str:
        f_now = confine(a.command_file, roots)
        dfd = held_dir(f_now, roots)
        try:
            again = _recorded_command(f_now, dfd)
            if f_now != f or hashlib.sha256(again.line.encode()).hexdigest() != digest or again.program != program:
                raise PolicyError(f"{quoted(str(f))} changed since the person approved it: nothing was started")
            if folder_routes(dfd) + version_file_routes(f.parent, program, roots) != files:  # twentieth round: a .env or
                # wandb/settings written while the person read; fifty-sixth: a version file that picks the interpreter
                raise PolicyError(f"the folder of {quoted(f.name)} now sends the run's credentials elsewhere or picks another "
                                  "interpreter in a way the question did not say (its .env, W&B settings or a version file "
                                  "changed): nothing was started; ask again")
            log = out_dir / f"restart-{datetime.now(UTC):%Y%m%dT%H%M%S%f}.log"
            ofd = open_out_dir(out_dir)  # a new file in the out dir itself, never through a link planted at its name
            try:
                lfd = os.open(log.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=ofd)
            finally:
                os.close(ofd)
            with os.fdopen(lfd, "ab") as out:  # started in the folder that was read (its held fd), not whatever its path names now
                # the file checked is what starts (`executable`), argv[0] as recorded (a venv's python finds its venv by it)
                proc = subprocess.Popen(argv, executable=program, cwd=f"/proc/self/fd/{dfd}", pass_fds=(dfd,), stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                        env=child_env({**env, **pin}))
        finally:
            os.close(dfd)
        return f"started pid {proc.pid}: {redact(line)[:300]} (output in {log})"

    if quoted(str(f.parent)).endswith('..."') and not str(f.parent).endswith("..."):  # where it runs, cut: the ninth round
        raise PolicyError(f"the folder of {quoted(f.name)} is a path of {len(str(f.parent))} characters, too long to show whole "
                          f"in the question (over {QUOTED_LIMIT}): the person would approve a folder whose end they never saw; "
                          "run it yourself, or from a shorter path")
    if masked(str(f.parent)):  # thirteenth round: `exp --token good` and `exp --token evil` read the same
        raise PolicyError(f"the folder of {quoted(f.name)} has a name the question would show in part as [REDACTED] (it reads as a "
                          "secret): the person would approve a folder they cannot see whole; rename it, or run it yourself")
    if decoded(str(f.parent)):  # sixteenth round: a folder `r\u0075n` read as `run`
        raise PolicyError(f"the folder of {quoted(f.name)} holds a JSON escape or an HTML character reference the question would "
                          "show decoded: the person would approve another folder's name; rename it, or run it yourself")
    shown = redact(line)
    if len(quoted(shown, MAX_SHOWN_COMMAND + 1)) > MAX_SHOWN_COMMAND + 2:  # the person must see all of what runs, never "..."
        raise PolicyError(f"{quoted(str(f))} records a command of {len(line)} characters: too long to show the person whole in "
                          f"the question (at most {MAX_SHOWN_COMMAND}), so it is not restarted from here; run it yourself")
    return Prepared(
        action=a, kind=ActionKind.RESTART_UNCHANGED, target=str(f),
        summary=f"start a new process, in {quoted(str(f.parent))}, running the command recorded in {quoted(f.name)} exactly: "
                f"{quoted(shown, MAX_SHOWN_COMMAND)}" + (" ([REDACTED] parts are passed as recorded)" if shown != line else "")
                + named_outside_ascii(str(f.parent), shown),
        impact=_restart_impact(env, argv, files),
        undo="stop it with kill-worker on the pid this returns",
        manual=f"cd {shlex.quote(str(f.parent))} && {shown}", identity={"command_sha256": digest, "routes": files}, run=run,
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
