"""Fetch a remote training log's tail and its run directory's companion files over ssh, read-only.

One ssh call runs one small POSIX sh script on the host (`sh -s`, the script on stdin, so the
login shell, even csh, never parses it; the path is quoted inside it): it prints the last lines of the log
(bounded in bytes: `tail -c` seeks, so a 10 GB log costs the same as a small one) and the heads
(configs) or tails (stderr, error files) of the companion files, each in a frame fenced by a
random token the file contents cannot forge. ssh runs without a local shell, never prompts
(BatchMode), checks host keys strictly, and is killed at a total deadline; whatever arrived
before a failure is returned as partial evidence.
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field

from ml_skills.collectors import env_seconds
from ml_skills.errors import InputError, SourceTimeout, SourceUnavailable, TargetNotFound
from ml_skills.models import CollectRequest, EvidenceStatus, Progress, RawEvidence, RawLog, SourceEvidence
from ml_skills.safety.programs import child_env, find_program
from ml_skills.safety.redact import redact, redact_cut

TAIL_LINES = 5000
TAIL_BYTES = 4 * 1024 * 1024
COMPANION_BYTES = 64 * 1024
MAX_COMPANIONS = 16
MAX_OUTPUT = TAIL_BYTES + MAX_COMPANIONS * COMPANION_BYTES + 64 * 1024
CONNECT_TIMEOUT = 10
DEADLINE = 60.0

# glob -> how it is read: head (a config: its start matters) or tail (an error stream: its end does)
COMPANIONS: list[tuple[str, str]] = [
    ("train_args.*", "head"), ("config.*", "head"), ("*_config.*", "head"), ("deepspeed_config.*", "head"),
    ("*.err", "tail"), ("stderr*", "tail"), ("*stderr*", "tail"), ("error.json", "head"), ("*error*.json", "head"),
]
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]{2,45}\]")
_TARGET = re.compile(r"(?P<user>[^@]*)@(?P<host>\[[^\]]*\]|[^:]*):(?P<path>.*)", re.DOTALL)


@dataclass(frozen=True)
class Remote:
    """A validated user@host:/path."""

    user: str
    host: str
    path: str

    def __str__(self) -> str:
        return f"{self.user}@{self.host}:{self.path}"


@dataclass
class Fetched:
    """What one ssh call brought back."""

    log: str | None = None
    log_state: str = "unknown"  # ok, missing, not-regular, unreadable, unknown (cut off)
    size: int | None = None
    companions: dict[str, str] = field(default_factory=dict)
    complete: bool = False


def parse_target(target: str) -> Remote:
    """Validate user@host:/absolute/path; refuse anything ssh could read as an option."""
    m = _TARGET.fullmatch(target)
    if not m:
        raise InputError(f"not a remote target: {target!r}; expected user@host:/absolute/path/to/train.log")
    user, host, path = m["user"], m["host"], m["path"]
    if host.startswith("-") or user.startswith("-"):
        raise InputError(f"refusing remote target {target!r}: a user or host starting with '-' would be read as an ssh option")
    if not _USER.fullmatch(user):
        raise InputError(f"invalid remote user {user!r}: use letters, digits, '_', '.', '-'")
    if not _HOST.fullmatch(host):
        raise InputError(f"invalid remote host {host!r}: use a host name, an IPv4 address, or [IPv6]")
    if not path.startswith("/") or len(path) > 4096 or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise InputError(f"invalid remote path {path!r}: give an absolute path without control characters")
    return Remote(user, host.strip("[]"), path)


def remote_script(path: str, token: str, lines: int = TAIL_LINES) -> str:
    """The POSIX sh program the host runs from stdin: it only reads, and prints framed sections."""
    q = shlex.quote(path)
    mark = f"==ML-SKILLS-{token}"
    globs = " ".join(f'"$d"/{g}' for g, _ in COMPANIONS)
    heads = "|".join(f"*/{g}" for g, how in COMPANIONS if how == "head")
    return f"""p={q}; d=$(dirname -- "$p"); n=0
if [ ! -e "$p" ]; then echo "{mark} LOG missing"
elif [ ! -f "$p" ]; then echo "{mark} LOG not-regular"
elif [ ! -r "$p" ]; then echo "{mark} LOG unreadable"
else echo "{mark} LOG ok $(wc -c < "$p")"; tail -c {TAIL_BYTES} -- "$p" | tail -n {int(lines)}; echo; fi
for f in {globs}; do
  [ -f "$f" ] && [ -r "$f" ] && [ "$f" != "$p" ] || continue
  case " $seen " in *" $f "*) continue;; esac; seen="$seen $f"
  n=$((n+1)); [ $n -le {MAX_COMPANIONS} ] || break
  echo "{mark} FILE $(basename -- "$f")"
  case "$f" in {heads}) head -c {COMPANION_BYTES} -- "$f";; *) tail -c {COMPANION_BYTES} -- "$f";; esac; echo
done
echo "{mark} END"
"""


def ssh_argv(remote: Remote, command: str, *, config: str | None = None, strict: str = "yes",
             connect_timeout: int = CONNECT_TIMEOUT) -> list[str]:
    """ssh as a list of arguments (no local shell), options first, `--` before the destination."""
    if strict not in ("yes", "accept-new"):
        raise InputError("strict host key checking must be 'yes' or 'accept-new'")
    argv = ["ssh"]
    if config:
        argv += ["-F", config]
    argv += [
        "-T", "-o", "BatchMode=yes", "-o", f"StrictHostKeyChecking={strict}", "-o", f"ConnectTimeout={int(connect_timeout)}",
        "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "ForwardAgent=no", "-o", "ForwardX11=no",
        "-o", "ClearAllForwardings=yes", "-o", "PermitLocalCommand=no", "-o", "LogLevel=ERROR",
        "--", f"{remote.user}@{remote.host}", command,
    ]
    return argv


def _run_bounded(argv: list[str], stdin: bytes, deadline: float, cap: int = MAX_OUTPUT) -> tuple[bytes, bytes, int | None]:
    """Run argv with stdin; return (stdout, stderr, exit code or None when killed at the deadline or cap). The program is
    found on the absolute entries of PATH only (safety/programs.py): never a file of its name in the working folder."""
    exe = find_program(argv[0])
    if exe is None:
        raise FileNotFoundError(f"{argv[0]} is not on an absolute entry of PATH")
    proc = subprocess.Popen(argv, executable=exe, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=child_env())
    assert proc.stdin is not None
    try:
        proc.stdin.write(stdin)  # a few KB: fits the pipe buffer, never blocks
        proc.stdin.close()
    except BrokenPipeError:
        pass
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    end = time.monotonic() + deadline
    killed = False
    while sel.get_map():
        left = end - time.monotonic()
        if left <= 0 or len(out) > cap:
            killed = True
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
            elif len(key.data) < cap + 65536:
                key.data.extend(chunk)
    sel.close()
    if killed:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return bytes(out), bytes(err), None if killed else code


def parse_output(data: bytes, token: str) -> Fetched:
    """Split the framed output; a frame cut off by the deadline is kept as far as it got.

    The script prints a newline after each body, which the split on "\n" + mark consumes, so
    each body comes back byte for byte.
    """
    mark = f"==ML-SKILLS-{token} "
    got = Fetched()
    text = data.decode("utf-8", errors="replace")
    parts = text.split("\n" + mark) if not text.startswith(mark) else [""] + text[len(mark):].split("\n" + mark)
    for part in parts[1:]:
        head, _, body = part.partition("\n")
        kind, _, rest = head.partition(" ")
        if kind == "LOG":
            state, _, size = rest.partition(" ")
            got.log_state = state or "unknown"
            if state == "ok":
                got.size = int(size) if size.strip().isdigit() else None
                got.log = body
        elif kind == "FILE" and rest:
            got.companions[rest] = body
        elif kind == "END":
            got.complete = True
    return got


def _ssh_error(remote: Remote, err: str, code: int) -> SourceUnavailable | SourceTimeout:
    """Turn ssh's stderr into one line that says what to do next."""
    e = err.strip().splitlines()
    last = redact(e[-1] if e else f"ssh exited with {code}")
    h = remote.host
    if "Connection refused" in err:
        return SourceUnavailable(f"ssh to {h}: connection refused: check that sshd runs there and the port is right ({last})")
    if "timed out" in err:
        return SourceTimeout(f"ssh to {h}: connection timed out: the host is down or a firewall drops the port ({last})")
    if "Could not resolve hostname" in err:
        return SourceUnavailable(f"ssh to {h}: unknown host name: check the spelling or your ssh config ({last})")
    if "IDENTIFICATION HAS CHANGED" in err:
        return SourceUnavailable(f"ssh to {h}: the host key CHANGED since it was recorded in known_hosts: verify with the host's admin before trusting it")
    if "Host key verification failed" in err or "No " in err and "host key is known" in err:
        return SourceUnavailable(f"ssh to {h}: the host key is not in known_hosts and unknown keys are never accepted: "
                                 f"verify its fingerprint, then add it (ssh-keyscan {h} >> ~/.ssh/known_hosts)")
    if "Permission denied" in err:
        return SourceUnavailable(f"ssh to {remote.user}@{h}: permission denied ({last.rsplit('(', 1)[-1].rstrip(').') or 'publickey'}): "
                                 "no password is ever prompted for: load a key into ssh-agent or set IdentityFile in your ssh config")
    if "No route to host" in err or "Network is unreachable" in err:
        return SourceUnavailable(f"ssh to {h}: host unreachable: check the address and your network ({last})")
    return SourceUnavailable(f"ssh to {h} failed (exit {code}): {last}")


def fetch(target: str, *, lines: int = TAIL_LINES, deadline: float = DEADLINE, config: str | None = None,
          strict: str = "yes", connect_timeout: int = CONNECT_TIMEOUT) -> tuple[Remote, Fetched, list[str]]:
    """One ssh call: the log's tail and the companion files. Raises when nothing at all arrived."""
    remote = parse_target(target)
    token = secrets.token_hex(8)
    script = remote_script(remote.path, token, lines).encode()
    argv = ssh_argv(remote, "sh -s", config=config, strict=strict, connect_timeout=min(connect_timeout, max(1, int(deadline))))
    try:
        out, err, code = _run_bounded(argv, script, deadline)
    except FileNotFoundError:
        raise SourceUnavailable("ssh is not installed here: install openssh-client, or copy the log and pass its local path") from None
    got = parse_output(out, token)
    problems: list[str] = []
    if code is None:
        if not out:
            raise SourceTimeout(f"ssh to {remote.host}: no answer within the {deadline:g} s deadline; the host or the "
                                "remote command hangs (a network filesystem?): try again, or copy the log and pass its local path")
        problems.append(f"the fetch was cut off at the {deadline:g} s deadline: what arrived is partial")
    elif code == 255 and got.log_state == "unknown":
        raise _ssh_error(remote, err.decode("utf-8", errors="replace"), code)
    elif not got.complete:
        problems.append(f"the remote command ended early (exit {code}): {redact_cut(err.decode('utf-8', 'replace').strip(), 200)}")
    if got.log_state != "ok":
        why = {"missing": "no such file", "not-regular": "not a regular file (FIFO, device or directory)",
               "unreadable": "permission denied", "unknown": "not received"}.get(got.log_state, got.log_state)
        if got.log_state == "unknown" and not got.companions:
            if code is None:
                raise SourceTimeout(f"ssh to {remote.host}: the log had not arrived by the {deadline:g} s deadline: try again "
                                    "with a longer ML_SKILLS_SSH_DEADLINE, or copy the log and pass its local path")
            raise SourceUnavailable(f"ssh to {remote.host}: the answer held none of the fetched sections (a ForceCommand or a "
                                    "login script answered instead): check that `ssh HOST tail FILE` works there")
        if not got.companions:
            err_cls = TargetNotFound if got.log_state == "missing" else SourceUnavailable
            raise err_cls(f"{remote}: {why} on {remote.host}; check the path (ls -l it over ssh)")
        problems.append(f"{remote.path}: {why} on {remote.host}; only the run directory's companion files were read")
    return remote, got, [redact(p) for p in problems]


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    """The collector for user@host:/path: the remote log's tail and its run directory's companion logs, as fetched."""
    deadline = env_seconds("ML_SKILLS_SSH_DEADLINE", DEADLINE)
    remote, got, problems = fetch(req.target or "", lines=max(req.last, TAIL_LINES), deadline=deadline,
                                  config=os.environ.get("ML_SKILLS_SSH_CONFIG") or None)
    logs: list[RawLog] = []
    if got.log is not None:
        log = RawLog(source=str(remote), text=got.log)
        if got.size is not None and got.size > len(got.log.encode()):
            log.notes.append(f"only the last {len(got.log.encode())} of {got.size} bytes were fetched; line numbers count from there")
            log.size_bytes = got.size
        logs.append(log)
    configs = []
    for name, body in got.companions.items():
        if any(re.fullmatch(g.replace(".", r"\.").replace("*", ".*"), name) for g, how in COMPANIONS if how == "tail"):
            logs.append(RawLog(source=f"{remote.user}@{remote.host}:{os.path.dirname(remote.path)}/{name}", text=body))
        else:
            configs.append(name)
    status = EvidenceStatus.OK if not problems else EvidenceStatus.PARTIAL
    facts = {"host": remote.host, "path": remote.path}
    if got.size is not None:
        facts["log size"] = f"{got.size} bytes"
    if got.companions:
        facts["companion files"] = ", ".join(sorted(got.companions))
    details = {"configs": {n: redact(got.companions[n])[:COMPANION_BYTES] for n in configs}}
    source = SourceEvidence(kind="ssh", name=redact(str(remote)), status=status, state=None, facts={k: redact(v) for k, v in facts.items()},
                            missing=problems, details=details)
    return RawEvidence(source=source, logs=logs)
