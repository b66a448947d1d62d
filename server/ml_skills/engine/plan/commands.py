"""Next commands that would decide what the evidence cannot, filled in from what was read.

Each command is read-only (it inspects, it never changes the run) and exact: the path, pod, quota,
permission or process comes from the decisive line, the log's tail or the run's facts. A command
that would need a value we do not have is not emitted; an empty list beats a `<placeholder>`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from ml_skills.engine.plan.facts import fact
from ml_skills.engine.plan.probes.choose import probe_commands
from ml_skills.engine.plan.probes.process import process_state
from ml_skills.lazyre import lazy
from ml_skills.models import Classification, FailureClass, LogEvidence, RunFact

_POD = lazy(r"\bpods?[/ ]\\?[\"']?([a-z0-9][a-z0-9.-]{2,62})(?=[\s\"'\\,;)]|$)")
_NAMESPACE = lazy(r"\bnamespace[ =:\"']+([a-z0-9][a-z0-9-]{0,62})")
_QUOTA = lazy(r"exceeded quota: ([a-z0-9][a-z0-9.-]{0,62})")
_MISSING = lazy(r"(?:No such file or directory|FileNotFoundError|does not exist|not found)\W{0,4}[:\s]\s*['\"]?"
                      r"(/?[\w.~@+-]+(?:/[\w.~@+=-]+)+/?|[\w.~@+-]+\.\w{1,10})['\"]?")
_DENIED = lazy(r"(?:Permission denied|Read-only file system)\W{0,4}[:\s]\s*['\"]?(/[\w.~@+-]+(?:/[\w.~@+=-]+)*)['\"]?")
_CUDA_STACK = lazy(r"(?i)no kernel image|CUDA driver version is insufficient|CUDA_ERROR_NO_DEVICE|no CUDA-capable device|"
                         r"libcu\w+\.so|undefined symbol|CUDA initialization|driver.*too old")
_GCP_PERMISSION = lazy(r"Permission '([a-z]+\.[\w.]+)' denied(?: on resource '(//[^']+)')?|does not have ([a-z]+\.[\w.]+) access")
_SERVICE_ACCOUNT = lazy(r"\b([\w.-]+@[\w-]+\.iam\.gserviceaccount\.com)\b")
_GCP_PROJECT = lazy(r"\bprojects/([a-z][a-z0-9-]{4,28}[a-z0-9])\b")
_AWS_DENIED = lazy(r"is not authorized to perform: ([\w-]+:\w+) on resource: (arn:aws[\w:/.*-]+)")
_AWS_LIMIT = lazy(r"service limit '([^']{3,120})'")
_USAGE = lazy(r"^usage: ([\w.-]+\.py)\b")
_PY_FRAME = lazy(r'File "([^"]+\.py)", line \d+, in <module>')
_HYDRA = lazy(r"(?i)hydra|omegaconf|ConfigAttributeError|ConfigKeyError|Key '[\w.]+' is not in struct")


_CORE = lazy(r"\(core dumped\)|core dumped")
# a process's own crash line (the shell's, faulthandler's, a signal handler's), not a list of possible causes naming SIGSEGV
_NATIVE = lazy(r"[Ss]egmentation fault|Illegal instruction|Fatal Python error: (?:Segmentation|Illegal)|[Ss]ignal (?:11|4)\b|"
                     r"(?:received|Caught|Signal:) ?(?:signal )?SIG(?:SEGV|ILL)\b")
# a native abort: glibc's or tcmalloc's heap checks, a glog/absl fatal check, a C++ terminate (the kernel logs none of them)
_ABORT = lazy(r"free\(\): |double free|corrupted (?:size|double-linked|unsorted)|Attempt to free invalid pointer|\(abort\+0x|"
                    r"^F\d{4} [\d:.]+ +\d+ [\w./-]+:\d+\] Check failed|\bF external/[\w./-]+:\d+\] Check failed|"
                    r"received signal SIGABRT|SIGABRT \(@|Aborted \(core dumped\)|Failing at address")
_ILLEGAL = lazy(r"(?i)illegal instruction|\bSIGILL\b")
_KILLED = lazy(r"(?i)^\s*Killed\s*$|\bKilled\b.*\bpython|exit(?:code| code| status|ed with)?[:= ]+(?:137|-9)\b|\bSIGKILL\b|signal 9\b|"
                     r"oom[-_ ]?kill|Out of memory: Killed process")
_STAMP = lazy(r"\b(20\d\d-[01]\d-[0-3]\d)[ T_]([0-2]\d:[0-5]\d)(?::[0-5]\d)?")


def _native_crash(cls: Classification, decisive: str, tail: list[str]) -> list[str]:
    """A crash in native code: the stack it left (a core) or, with no core, the library the kernel says it died in."""
    if cls.primary not in (None, FailureClass.PROCESS_CRASH, FailureClass.CUDA_RUNTIME):
        return []  # a crash that followed another failure (a bus error of a full /dev/shm, an OOM): that failure's commands
    text = [decisive, *tail[-30:]]
    if not any(_NATIVE.search(x) or _CORE.search(x) for x in text):
        if any(_ABORT.search(x) for x in text):
            return [("coredumpctl list --no-pager | tail -3; coredumpctl info --no-pager   # the abort's native stack, if "
                    "systemd-coredump kept the core (the kernel logs no line for an abort)")]
        return []
    out: list[str] = []
    if any(_CORE.search(x) for x in text):
        out.append("coredumpctl list --no-pager | tail -3; coredumpctl info --no-pager   # the crash's signal, executable and native stack, "
                   "if systemd-coredump kept the core")
        out.append("gdb -batch -ex 'thread apply all bt' \"$(command -v python)\" core*   # when the core was written to the run's "
                   "working directory instead")
    else:
        out.append("dmesg -T | grep -E 'segfault at|trap invalid opcode|general protection' | tail -5"
                   "   # the kernel names the library the process died in (no core was written)")
    if any(_ILLEGAL.search(x) for x in text):
        out.append("grep -o -w -E 'avx|avx2|avx512f|fma|sse4_2' /proc/cpuinfo | sort -u   # the CPU's vector extensions: "
                   "a prebuilt wheel needing one the CPU lacks dies of an illegal instruction")
    return out


def _kill_time(cls: Classification, decisive: str, tail: list[str]) -> list[str]:
    """A SIGKILL (the OOM killer, a scheduler): the kernel log around the time the log last printed."""
    if cls.primary not in (FailureClass.OOM, FailureClass.PROCESS_CRASH) or not _KILLED.search(decisive):
        return []
    stamp = next((m for line in reversed([*tail, decisive]) if (m := _STAMP.search(line))), None)
    if stamp is None:
        return []
    try:
        when = datetime.strptime(f"{stamp.group(1)} {stamp.group(2)}", "%Y-%m-%d %H:%M")
    except ValueError:
        return []
    since, until = (when - timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M"), (when + timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M")
    return [(f"journalctl -k --since '{since}' --until '{until}' --no-pager | grep -i -E 'killed process|out of memory|oom'"
             f"   # the kernel's kill record after the log's last time ({when:%Y-%m-%d %H:%M}); without journald: dmesg -T")]


def _tail(logs: list[LogEvidence], n: int = 80) -> list[str]:
    return [line for log in logs if log.tail for line in log.tail.lines[-n:]]


def _kubernetes(decisive: str, tail: list[str]) -> list[str]:
    ns = _NAMESPACE.search(decisive)
    in_ns = f" -n {ns.group(1)}" if ns else ""
    if (q := _QUOTA.search(decisive)) is not None:
        return [f"kubectl describe resourcequota {q.group(1)}{in_ns}   # the quota's limits and what uses them now"]
    if (pod := _POD.search(decisive)) is not None:
        return [f"kubectl describe pod {pod.group(1)}{in_ns}   # events: scheduling, image pulls, OOMKilled, evictions"]
    return []


def _files(decisive: str) -> list[str]:
    out: list[str] = []
    if (m := _MISSING.search(decisive)) is not None:
        missing = m.group(1)
        parent = str(Path(missing).parent)
        out.append(f"ls -la {shlex.quote(missing)}" + (f"; ls -la {shlex.quote(parent)} | head -20" if parent not in (".", "/") else "")
                   + "   # is it there, for the run's user, from the run's working directory?")
    if (m := _DENIED.search(decisive)) is not None:
        path = m.group(1)
        out.append(f"ls -ld {shlex.quote(path)} {shlex.quote(str(Path(path).parent))}; id; findmnt -T {shlex.quote(str(Path(path).parent))}"
                   "   # owner, mode and mount of the path")
    return out


def _cloud(decisive: str, tail: list[str]) -> list[str]:
    text = "\n".join([decisive, *tail[-20:]])
    out: list[str] = []
    if (perm := _GCP_PERMISSION.search(text)) is not None:
        permission, resource = perm.group(1) or perm.group(3), perm.group(2)
        sa = _SERVICE_ACCOUNT.search(text)
        project = _GCP_PROJECT.search(text)
        if sa and resource:
            out.append(f"gcloud policy-troubleshoot iam {shlex.quote(resource)} --permission={permission} --principal-email={sa.group(1)}"
                       "   # which binding is missing")
        elif sa and project:
            out.append(f"gcloud projects get-iam-policy {project.group(1)} --flatten=bindings "
                       f"--filter='bindings.members:serviceAccount:{sa.group(1)}' --format='value(bindings.role)'"
                       f"   # the roles it has; one of them must grant {permission}")
    if (aws := _AWS_DENIED.search(text)) is not None:
        out.append(f"aws sts get-caller-identity; aws iam simulate-principal-policy --action-names {aws.group(1)} "
                   f"--resource-arns {shlex.quote(aws.group(2))} --policy-source-arn \"$(aws sts get-caller-identity --query Arn --output text)\""
                   "   # which policy denies it (run as the job's role)")
    if (limit := _AWS_LIMIT.search(text)) is not None:
        out.append(f"aws service-quotas list-service-quotas --service-code sagemaker --query "
                   f"{shlex.quote(f'Quotas[?QuotaName==`{limit.group(1)}`].[QuotaName,Value]')} --output table"
                   "   # the limit, then request an increase for it")
    return out


def _launch_help(decisive: str, tail: list[str], facts: list[RunFact]) -> list[str]:
    usage = next((m.group(1) for line in tail if (m := _USAGE.match(line))), None)
    if usage:
        return [f"python {shlex.quote(usage)} --help   # the flags this version of the script accepts"]
    if _HYDRA.search(decisive):
        script = next((m.group(1) for line in tail if (m := _PY_FRAME.search(line))), None)
        if script:
            return [f"python {shlex.quote(script)} --cfg job   # the composed Hydra config, with the key it could not find"]
    return []


_RESUMABLE = {FailureClass.NAN_INF, FailureClass.OPTIMIZATION_DIVERGENCE, FailureClass.PROCESS_CRASH, FailureClass.OOM,
              FailureClass.NCCL_DISTRIBUTED, FailureClass.STALLED, FailureClass.CUDA_RUNTIME, FailureClass.IO_CHECKPOINT}


def _resume_point(cls: Classification, logs: list[LogEvidence], facts: list[RunFact], log_target: str) -> list[str]:
    """The newest checkpoint the log says it saved before the failure: checked, it becomes the resume point.

    Before the failure's first sign, not its decisive line: a run that went on with NaN weights for thousands of steps
    saved NaN checkpoints after its onset (trial 8's case04 offered checkpoint-12000, saved 2,200 steps into NaN)."""
    stop = cls.decisive.line_no if cls.decisive else None
    onsets = [a.line_no for log in logs if log.source == log_target for a in log.trajectory.anomalies
              if a.failure_class is cls.primary and a.line_no is not None]
    if onsets:
        stop = min([*onsets, *([stop] if stop is not None else [])])
    saves = [f for f in facts if f.name == "checkpoint_saved" and f.line_no and (stop is None or f.line_no < stop)]
    if cls.primary not in _RESUMABLE or not saves:
        return []
    last = saves[-1]
    path = last.value.split(" (step")[0]
    if not path or "/" not in path:
        return []
    folder = path if path.endswith("/") or "." not in Path(path).name else str(Path(path).parent)
    where = "" if folder.startswith("/") else ", from the run's working directory"
    return [(f"ml-skills check-failed-run {shlex.quote(log_target)} --artifacts {shlex.quote(folder)}"
             f"   # checks the checkpoint saved at line {last.line_no} ({last.value}) without loading it{where}, "
             "and builds the resume command")]


# a line that names another file as holding the error's full text: Ray Tune's 'Error file: .../error.txt' and its errored
# trials' table, Kaldi's 'job failed, log is in exp/.../train.1.log', torchelastic's 'error_file: ...', 'see ... for details'
_POINTER = lazy(r"(?i)(?:\blogs? (?:is|was|are) (?:in|at|written to)|\berror[_ ]file|\bfailures?|\bsee(?: also)?|\bcheck|"
                r"\bdetails (?:are )?(?:in|at)|\b(?:written|dumped|saved|stored) (?:to|in|at))\s*[:=]?\s*['\"]?"
                r"(?P<path>(?:~|\.{1,2})?/?[\w.@+=-]+(?:/[\w.@+=-]+)*\.(?:txt|log|out|err|json))\b"
                r"|(?P<error>(?:~|\.{1,2})?(?:/[\w.@+=-]+)+/error[\w.-]*\.(?:txt|log|json))\b")
_POINTED_MAX = 2
_FAILED = lazy(r"(?i)error|fail|crash|traceback|exception|abort|killed|died")
_POINTED_EXTENSIONS = (".txt", ".log", ".out", ".err", ".json")


def may_point(line: str) -> bool:
    """False only for a line _POINTER cannot match, tested in a fraction of the regex's time (it tries its alternatives
    at every position: 45 us a tail line): each of its matches ends in one of these extensions, in any case. A line
    that is not ASCII is always searched, since re's IGNORECASE folds letters such as 'ſ' to 's'."""
    if not line.isascii():
        return True
    low = line.lower()
    return any(e in low for e in _POINTED_EXTENSIONS)


# where a _POINTER match may start (a keyword, or a path's first '~', '.' or '/'); a keyword's words; a chain of path
# segments from a place (what either alternative's path reads)
_POINTER_FROM = lazy(r"(?i)[~./]|\b(?=logs? |error[_ ]file|failures?|see|check|details |written |dumped |saved |stored )")
_POINTER_WORDS = lazy(r"(?i)(?:\blogs? (?:is|was|are) (?:in|at|written to)|\berror[_ ]file|\bfailures?|\bsee(?: also)?|\bcheck|"
                      r"\bdetails (?:are )?(?:in|at)|\b(?:written|dumped|saved|stored) (?:to|in|at))")
_PATH_SEGMENTS = lazy(r"(?:~|\.{1,2})?(?P<s>(?:/[\w.@+=-]++)*+)")  # after a '~', '.' or '/' start: what its error file's path reads
_WORD_SEGMENTS = lazy(r"[\w.@+=-]*+(?:/[\w.@+=-]++)*+")  # after a keyword: what its path reads with nothing between
_WORDS_MOST = 16  # a keyword's words with no space between them (the longest, 'error_file', is 10 characters)


def pointers(line: str) -> Iterator[re.Match[str]]:
    """`_POINTER.finditer(line)`, trying only the starts that can match.

    A path's '/' and '.' and a keyword inside a path both start a match and are part of one: searched, every '/' of a
    line of '/a/a/...' (and every 'see' of '/see/see/...') read the path to its end and back, 30 ms a displayed tail line
    of 2,000 characters, and 300 such lines held the CLI 11 s (twenty-fifth round). A '/' or '.' inside the segments a
    failed '/', '.' or '~' start read would find a path ending there that the failed start's path extends; a keyword
    inside the segments after a failed keyword, more than a keyword's length before their end, is followed by its path
    in them, which the failed keyword's path extends: none of them can match."""
    path_dead = word_dead = -1  # '/' or '.', and keyword, starts up to here lie inside a failed start's segments
    pos = 0
    for c in _POINTER_FROM.finditer(line):
        i = c.start()
        if i < pos or (line[i] in "./" and i <= path_dead) or (line[i] not in "~./" and i <= word_dead):
            continue
        m = _POINTER.match(line, i)
        if m is not None:
            yield m
            pos = m.end()
        elif line[i] in "~./":
            if (seg := _PATH_SEGMENTS.match(line, i)) is not None and seg["s"]:
                path_dead = max(path_dead, seg.end() - 1)
        elif (w := _POINTER_WORDS.match(line, i)) is not None and (seg := _WORD_SEGMENTS.match(line, w.end())) is not None:
            word_dead = max(word_dead, seg.end() - _WORDS_MOST)


def _pointed_files(logs: list[LogEvidence], decisive: str) -> list[str]:
    """Read the file the log itself names as holding the error, before anything else: a trial's, a job step's or a worker's
    own output, which a summary line only points to."""
    found: dict[str, tuple[str, int]] = {}
    for log in logs:
        if log.tail is None:
            continue
        for n, line in enumerate(log.tail.lines, log.tail.start_line):
            if "." not in line or line.lstrip().startswith('File "') or not may_point(line):
                continue
            for m in pointers(line):
                path = m.group("path") or m.group("error")
                if not _FAILED.search(line.replace(path, "")):
                    continue  # a file the run saved ('tokenizer config saved to ...') is output, not a pointer to an error
                if path.startswith(("/proc/", "/dev/", "/sys/")) or ("wandb/" in path and "wandb" not in decisive.lower()):
                    continue  # W&B's own debug log holds the logger's errors, not the run's
                found.setdefault(path, (Path(log.source).name, n))
    out: list[str] = []
    for path, (name, n) in list(found.items())[:_POINTED_MAX]:
        read = "cat" if path.endswith(".json") else "tail -n 100"
        where = "" if path.startswith(("/", "~")) else ", from the run's working directory"
        more = f"; {len(found) - _POINTED_MAX} more named" if len(found) > _POINTED_MAX and not out else ""
        quoted = "~/" + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)
        out.append(f"{read} {quoted}   # {name}:{n} names this file as holding the error's own output{where}{more}")
    return out


def diagnostic_commands(cls: Classification, logs: list[LogEvidence], facts: list[RunFact], log_target: str | None) -> list[str]:
    """Read-only commands that would add the evidence this diagnosis lacks, in the order to run them."""
    decisive = cls.decisive.text if cls.decisive else ""
    tail = _tail(logs)
    out: list[str] = _pointed_files(logs, decisive) + _native_crash(cls, decisive, tail) + _kill_time(cls, decisive, tail)
    out += _kubernetes(decisive, tail) + _files(decisive) + _cloud(decisive, tail)
    if cls.primary is FailureClass.CONFIG_ERROR:
        out += _launch_help(decisive, tail, facts)
    if cls.primary is FailureClass.IO_CHECKPOINT and re.search(r"(?i)no space left|quota exceeded|Errno 28|Errno 122", decisive):
        out.append("df -h . ${TMPDIR:-/tmp}; du -sh ./* 2>/dev/null | sort -h | tail -5   # in the run's output directory")
    if cls.primary is FailureClass.CUDA_RUNTIME and _CUDA_STACK.search(decisive):
        out.append("nvidia-smi; python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), "
                   "torch.cuda.get_arch_list())\"   # driver, CUDA runtime and the GPU architectures this build supports")
    out += [c for c in probe_commands(cls, logs, facts, decisive, tail) if c not in out]
    if (cls.primary is None or cls.primary is FailureClass.STALLED) and not out:
        out += process_state(facts, tail, by_name=cls.primary is None)  # a stall's plan already dumps every python process
    if log_target is not None:
        q = shlex.quote(log_target)
        if cls.primary is FailureClass.NCCL_DISTRIBUTED:
            out.append(f"grep -n -i -E 'error|exception|killed|signal|exitcode' {q} | grep -v -i -E 'watchdog|timeout|ProcessGroupNCCL' | head -5"
                       "   # the first error of any rank: collective timeouts follow it")
        if cls.primary in (FailureClass.NAN_INF, FailureClass.OPTIMIZATION_DIVERGENCE, FailureClass.STALLED):
            out.append(f"ml-skills watch-run {q} --interval 60   # on the relaunch: alerts at a NaN, a loss spike or a stall")
        out += _resume_point(cls, logs, facts, log_target)
        beside = max((log.siblings for log in logs if log.source == log_target), default=0)
        if fact(facts, "launch_command") is None and beside:
            out.append(f"ml-skills check-failed-run {shlex.quote(str(Path(log_target).parent))}"
                       f"   # the {beside} other file(s) beside the log: configs, launch command, checkpoints")
    return out
