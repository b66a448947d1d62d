"""How a log that stops with no error can still say the run hung.

A log whose last lines hold no error and no sign of completion is a hang, a process killed
without a word, or a paste cut short. Two endings point to a hang. A stack printed while the
process waited (a Ctrl-C or a faulthandler dump, the paste cut before its exception line) whose
innermost frames are a blocking call: a queue's get, a pipe's recv, a lock, a collective. And a
last line at a point where every rank waits for the others (distributed start-up, the first
collective, the first batch of an epoch): one missing rank or one stuck DataLoader worker
blocks the rest there without a message. Each is weak evidence, named only when nothing else in
the log names a failure, and said with low confidence.
"""

from __future__ import annotations

import re
from functools import cache

from ml_skills.catalog.loader import compiled_exception_rules
from ml_skills.engine.analyse.cuttraceback import CARETS as _CARETS
from ml_skills.engine.analyse.cuttraceback import ends_in_traceback
from ml_skills.engine.classify.signals import MIN_PRIMARY, Signal
from ml_skills.engine.read.excerpts import LINE_QUOTE
from ml_skills.engine.read.metrics import parse_line
from ml_skills.engine.read.tracebacks import FRAME as TB_FRAME
from ml_skills.lazyre import lazy
from ml_skills.models import FailureClass, LogEvidence, Role
from ml_skills.safety.redact import redact_cut

STOP_W = MIN_PRIMARY * 1.1  # enough to be named alone; any error, even a survived one's cause, outweighs it
CONFIDENCE_CAP = 0.45  # where a log stops is not proof that the process is still alive

# what distributed initialisation prints (torch.distributed, DeepSpeed, Lightning, NCCL, accelerate)
DIST_INIT = lazy(
    r"(?i)(init_process_group|init_distributed|Initializing TorchBackend|Initializing distributed: GLOBAL_RANK|"
    r"initializing ddp: GLOBAL_RANK|Using (PyTorch )?DDP\b|"
    r"store_based_barrier|Waiting in store based barrier|Rendezvous|NCCL INFO (Bootstrap|NET/|Using network|comm 0x|"
    r"cudaDriverVersion|Init START|Setting affinity|Channel \d+/)|NCCL version \d|"
    r"MASTER_ADDR|Distributed environment: (MULTI_GPU|DEEPSPEED)|world_size|\[c10d\]|TCPStore|"
    # TensorFlow's multi-worker cluster: each worker's gRPC server, the collective strategy
    r"Started server with target: grpc://|MultiWorkerMirroredStrategy|CollectiveAllReduceStrategy)"
)
# the processes meeting, as they print it themselves (not a launcher's echo of its settings: world_size, MASTER_ADDR):
# NCCL's communicator set-up, torch's process group and store, Lightning's and Ray Train's start-up, TF's gRPC servers
_MET = lazy(
    r"(?i)(NCCL INFO (Bootstrap|NET/|Using network|comm 0x|Init START|Channel \d+|Trees|Connected all)|init_process_group|"
    r"Initializing (TorchBackend|distributed: GLOBAL_RANK)|initializing ddp: GLOBAL_RANK|store_based_barrier|"
    r"Waiting in store based barrier|\[c10d\]|TCPStore|Started server with target: grpc://)"
)
# the first collectives of training (PyTorch's reducer, TF's MirroredStrategy), the training loop's start (mmcv's
# workflow line), its first step or batch, a bar still at its first item, and a tuning run none of whose trials has
# started: where every rank or worker first waits
_FIRST_SYNC = lazy(
    r"(?i)(Reducer buckets have been rebuilt|batch_all_reduce|all-reduces with algorithm|Running collective:|"
    r"Reduce to \S+ then broadcast to|NCCL INFO (Connected all (rings|trees)|Init COMPLETE|ncclCommInitRank)|"
    r"workflow: \[\('train'|\b(step|iter|iteration)\s*[:=#]?\s*0\b(?![.,]?\d)|\[\s*0\s*/\s*\d+\s*\]|"
    r"(^|[\s:])0it \[|(^|\s)0%\|[^|]*\|\s*0/\d+|"
    # Ray Tune's status with every trial still waiting for its resources (or its DEBUG line saying so again), and Ray's
    # warning that an actor or task finds no resources: none has started
    r"Number of trials: \d+(?:/\d+)? \(\d+ PENDING\)\s*$|: Status PENDING unchanged\.?\s*$|"
    r"The actor or task with ID \S+ cannot be scheduled right now)"
)
# torch.utils.cpp_extension's JIT build: every process but one waits on the build directory's lock file while that one
# compiles, and a lock left by a killed build makes all of them wait forever ('Lock file exists in build directory')
_RECORD_BEFORE = lazy(r"(?i)\b(?:best|min|max|lowest|highest)[\s_]*$")
_JIT_BUILD = lazy(r"(?i)(as PyTorch extensions root|Lock file exists in build directory|Emitting ninja build file|"
                  r"Building extension module|Waiting for the lock)")
# the first step or batch is where ranks or workers first wait for each other: a line that only announces it (a bare
# 'Epoch 0 step 0') may be a process stuck there, but a first step that logged its loss was done, and with no sign in
# the log of processes sharing the work (distributed start-up, rank-prefixed lines, workers, MPI/Horovod) nobody else
# held it up
_FIRST_STEP_ONLY = lazy(
    r"(?i)^(\b(step|iter|iteration)\s*[:=#]?\s*0\b(?![.,]?\d)|\[\s*0\s*/\s*\d+\s*\]|(^|[\s:])0it \[|(^|\s)0%\|[^|]*\|\s*0/\d+)$"
)
# a bar whose label names a process's own reading of files ('Loading checkpoint shards', 'Downloading', 'Map'): each
# process loads weights or data by itself there, nobody waits for anybody (healthy 757: a log stopping at shard 0/2)
_OWN_WORK_BAR = lazy(r"(?i)\b(?:load|download|fetch|extract|convert|tokeniz|map|filter|prepar|preprocess|generat|read|cach)\w*+"
                     r"[^|:\n]{0,80}+:?\s*+$")
_SHARED_WORK = lazy(r"(?i)(\[rank\s*\d+\]|\brank\s*(?:[:=]\s*)?\d+|num_workers\s*[:=]\s*[1-9]|\bworker\s*\d+|horovod|mpirun|\bhvd\.|"
                          r"local_rank|torchrun|torch\.distributed|deepspeed|accelerate launch|\bDDP\b)")
# a process group shutting down after the work is done (c10d's store closing, destroy_process_group)
# the elastic agent's own lines as it restarts a failed worker group ('Worker group FAILED. 3/3 attempts left; will
# restart worker group', then its rendezvous with 'restart_count=1')
_RESTARTING = lazy(r"will restart worker group|restart_count=[1-9]")
_TEARDOWN = lazy(r"(?i)(destroy|clean ?up|shut ?down|finished|closing|closed|exiting|terminat|uv_loop_close)")
# NCCL's error-return trace: with NCCL_DEBUG=INFO every function an error passes through logs 'file.cc:LINE -> CODE'
# (2 system, 3 internal, 5 invalid usage, 6 remote): a log ending on it ended in a failed call, nobody waiting
_NCCL_RETURN = lazy(r"NCCL INFO \S+\.(cc|h|cu):\d+ -> [1-9]\d*(\s|$)")
_TABLE_ROW = lazy(r"^\s*[+|][-+=|]*[-+=|]\s*$|^\s*\|.*\|\s*$")
AT_SYNC_POINT, CUT_WAITING, CUT_IN_CALL = "stopped-at-sync-point", "stack-cut-while-waiting", "stack-cut-in-call"
CANCELLED_IDLE = "cancelled-without-progress"
SCHEDULER_CANCELLED = "scheduler-cancelled"  # the catalog's hint for a person's scancel or bkill
BEFORE_FIRST_STEP = "stopped-in-distributed-start-up"
WAIT_LOOP = "waiting-in-a-loop"
FINDING = {
    WAIT_LOOP: "the log ends printing the same wait line over and over, with nothing else between",
    BEFORE_FIRST_STEP: "the log stops with no error after distributed start-up and before any training step",
    CANCELLED_IDLE: "a person cancelled the job and the log holds no training progress before it",
    AT_SYNC_POINT: "the log stops with no error where ranks or workers wait for each other",
    CUT_WAITING: "the log ends in a stack cut before its exception line, its innermost frames waiting",
    CUT_IN_CALL: "the log ends in a traceback cut before its exception line, raised inside",
}
MEANING = {  # the root cause's words
    WAIT_LOOP: ("The log ends with the program polling for something that does not come (a file 'to exist', a server, a "
                "lock, a GPU to free up), printing the same line each time: it waits in a loop and makes no progress. "
                "What it waits for is in the line: a checkpoint whose name the writer never produces (another format or "
                "naming scheme, another directory), a service that is down, a lock a killed process left behind."),
    AT_SYNC_POINT: ("The log stops with no error at a point where every rank or worker waits for the others (distributed "
                    "start-up, the first collective, the first batch, a JIT extension build): a hang there usually means a rank "
                    "that never joined, an unreachable MASTER_ADDR:PORT, a broken GPU peer-to-peer path, a stuck DataLoader "
                    "worker or a build lock left by a killed compile (torch_extensions' 'lock' file). If the "
                    "process ended instead, the log is cut: the job's stderr says how."),
    BEFORE_FIRST_STEP: ("The log stops with no error after its processes started up together (a process group, NCCL, a "
                        "TensorFlow cluster's gRPC servers) and before it logged any training step: the first collective "
                        "or the first batch is where every worker waits for the others, so a worker that never joined, an "
                        "unreachable peer address or a stuck data loader holds all of them there without a message. If "
                        "the process ended instead, the log is cut: the job's stderr says how."),
    CANCELLED_IDLE: ("A person cancelled the job (scancel or bkill, not a limit) and nothing in the log before it shows "
                     "training progress: the run was stuck before its first step (data loading, distributed start-up, a "
                     "compile) or so slow that it never logged one, and whoever cancelled it had waited for it. If it was "
                     "cancelled on purpose right after start, nothing failed."),
    CUT_WAITING: ("The log ends in a stack printed while the process waited (its innermost frames are a blocking call: a "
                  "queue, a pipe, a lock or a collective), cut before the exception line: a Ctrl-C or a stack dump of a "
                  "process that had stopped progressing."),
}
LAST_LINES = 2  # the sync point must be on one of the last two non-empty lines (ranks interleave)


@cache
def _blocking_frames() -> re.Pattern[str]:
    """The frames of a process that was waiting: the catalog's rule for a Ctrl-C during a hang."""
    return next(frames for rule, _, _, frames in compiled_exception_rules() if rule.id == "user-interrupt" and frames is not None)


_BAR_FRAME = lazy(r"\d{1,3}%\|")


def last_frame(text: str) -> str:
    """A progress bar's newest frame: a line of redrawn frames (joined by carriage returns, or run together where a
    copy dropped them) is where the bar got to, not where it started ('0/28 ... 1/28 ... 28/28' is past its first batch)."""
    if "\r" in text:
        text = next((f for f in reversed(text.split("\r")) if f.strip()), text)
    starts = [m.start() for m in _BAR_FRAME.finditer(text)]
    return text[starts[-1]:] if len(starts) > 1 else text


def _loading(raw: str) -> bool:
    """A bar at its start whose label names a process's own reading of files: the words before its newest frame (frames
    run together keep the label in front of the last one)."""
    frame = last_frame(raw)
    m = _FIRST_SYNC.search(frame)
    if m is None:
        return False
    at = max(0, raw.rfind(frame)) + m.start()
    return _OWN_WORK_BAR.search(raw[max(0, at - 200) : at]) is not None


def stop_signals(log: LogEvidence) -> list[Signal]:
    """A weak stalled signal from how the log ends, or none."""
    if "completed-marker" in log.frameworks or not log.tail or not log.tail.lines:
        return []
    lines = [(i, x) for i, x in enumerate(log.tail.lines, log.tail.start_line) if x.strip() and not _CARETS.match(x)]
    if not lines:
        return []
    cancelled = _cancelled_idle(log)
    if cancelled:
        return cancelled
    last_line = lines[-1][0]
    ending = lines[-min(len(lines), LAST_LINES)][0]  # the first of the last lines
    if any(t.line_no >= ending for t in log.tracebacks):
        return []  # an exception ended it
    if ends_in_traceback(log):
        frames = "\n".join(x for _, x in lines[-4:])
        if _blocking_frames().search(frames):
            return [_signal(log, last_line, CUT_WAITING, lines[-1][1])]
        return _cut_in_call(log, [x for _, x in lines])
    if any(h.line_no >= ending and h.role is not Role.HINT for h in log.hits):
        return []  # an error on the last lines (a launcher's exit code glued to a bar) says how it ended
    failed = max((h.line_no for h in log.hits if h.role is not Role.HINT), default=None)
    if failed is not None and any(i > failed and _RESTARTING.search(x) for i, x in lines):
        return []  # torchelastic restarting its workers after a failure (1564): the rendezvous is the restart, not a wait
    if _NCCL_RETURN.search(lines[-1][1]):
        return []  # an NCCL call returned an error: the log ends in its failure, not at a wait
    shared = None
    text_lines = [(i, x) for i, x in lines if not _TABLE_ROW.match(x)]  # a status table is read with the line above it
    lp = log.trajectory.last_progress
    for i, raw in reversed(text_lines[-LAST_LINES:]):
        text = last_frame(raw)
        m = _FIRST_SYNC.search(text)
        step0 = m is not None and not DIST_INIT.search(text) and _FIRST_STEP_ONLY.match(m.group(0)) is not None
        if step0 and lp is not None and lp.source == log.source and i < lp.line_no:
            continue  # a bar at step 0 that a later line shows past it ('0/28' then '1/28 [00:31<14:22]'): no wait there
        if step0 and m is not None and _RECORD_BEFORE.search(text, 0, m.start()):
            continue  # 'Best iteration: 0': a summary of the run names its best round, not a counter at its start
        if step0 and m is not None and _loading(raw):
            continue  # 'Loading checkpoint shards: 0%| | 0/2': a process reading its own files waits for nobody
        if (DIST_INIT.search(text) or m is not None or _JIT_BUILD.search(text)) and not _TEARDOWN.search(text):
            if step0:
                if shared is None:
                    shared = any(DIST_INIT.search(x) or _SHARED_WORK.search(x) for _, x in lines)
                parsed = parse_line(text)
                if not shared and parsed is not None and parsed[0]:
                    continue  # one process whose first step logged its loss had passed that step: it waited for nobody (corpus 515)
            return [_signal(log, i, AT_SYNC_POINT, text)]
    if (loop := _waiting_in_a_loop(lines)) is not None:
        return [_signal(log, loop[0], WAIT_LOOP, loop[1])]
    if _nothing_else_named(log) and any(_MET.search(x) for _, x in lines) \
            and not any(_TEARDOWN.search(x) or _loading(x) for _, x in lines[-LAST_LINES:]):
        return [_signal(log, last_line, BEFORE_FIRST_STEP, lines[-1][1])]
    return []


_WAITING = lazy(r"(?i)\bwait(?:ing|s)?+\s++(?:for|until|on)\b")
_DIGIT_RUNS = lazy(r"\d+")
WAIT_REPEATS = 3  # the last lines that say something, all the same wait line (digits aside: a counter, a time)


def _waiting_in_a_loop(lines: list[tuple[int, str]]) -> tuple[int, str] | None:
    """(line, text) of the first of the log's last WAIT_REPEATS or more lines when they are one wait line printed again
    and again ('Waiting for .../VGGnet_fast_rcnn_iter_70000.ckpt to exist...', 1316), else None."""
    last = [(i, x) for i, x in lines[-WAIT_REPEATS:]]
    if len(last) < WAIT_REPEATS or not _WAITING.search(last[-1][1][:500]):
        return None
    shape = {_DIGIT_RUNS.sub("#", x.strip()) for _, x in last}
    return last[0] if len(shape) == 1 else None


def _nothing_else_named(log: LogEvidence) -> bool:
    """No progress line and no line that names a failure: where the log stops is all it says."""
    return log.trajectory.last_progress is None and not any(h.role is not Role.HINT for h in log.hits)


def _cancelled_idle(log: LogEvidence) -> list[Signal]:
    """A job a person cancelled with no progress line before it had not got going: weak evidence that it was stuck.

    A cancellation after steady progress says nothing about a failure (someone stopped a run they no longer wanted);
    one that ends a log of start-up lines only, or a stack, is the only sign of how long it waited. Any error line, a
    traceback or a progress line before the cancellation leaves it to them."""
    cancel = next((h for h in log.hits if h.signature_id == SCHEDULER_CANCELLED), None)
    if cancel is None or log.tracebacks or not _nothing_else_named(log):
        return []
    return [_signal(log, cancel.line_no, CANCELLED_IDLE, cancel.text)]


_TB_HEAD = lazy(r"Traceback \(most recent call last\)")


def _cut_in_call(log: LogEvidence, lines: list[str]) -> list[Signal]:
    """A traceback cut before its exception line still says where it was raised: its frames, read by the catalog's
    where-it-was-raised rules (a checkpoint save or load, a data loader, a collective, evaluation), name the call that
    failed, though not what was raised. Weak evidence, read only when no line of the log names a failure (a launcher's
    own traceback after a worker's kill is cut the same way, and the kill is the cause)."""
    if any(h.role is not Role.HINT for h in log.hits):
        return []
    start = max((i for i, x in enumerate(lines) if _TB_HEAD.search(x)), default=None)
    if start is None:  # a paste that starts among the frames: its trailing block of frames and source lines
        start = len(lines)
        while start > 0 and (TB_FRAME.match(lines[start - 1]) or lines[start - 1].startswith((" ", "\t"))):
            start -= 1
    frames: list[str] = []
    code: list[str] = []
    for x in lines[start:]:
        m = TB_FRAME.match(x)
        if m:
            frames.append(f"{m['file']}:{m['func'] or '?'}")
        elif frames and x.strip():
            code.append(f"  {x.strip()}")
    if not frames:
        return []
    text = "\n".join([*frames[-12:], *code[-12:]])
    for rule, rx_type, rx_msg, rx_frames in compiled_exception_rules():
        if rx_frames is None or rule.exc_type != ".*" or rule.message != ".*":
            continue  # only a rule that needs no exception type or message can read a traceback that lost them
        if rx_frames.search(text):
            where = frames[-1].replace("\\", "/").rsplit("/", 1)[-1]
            return [Signal(rule.failure_class, STOP_W, "stop", f"{CUT_IN_CALL}:{rule.id}", log.source, _last_line(log),
                           f"{FINDING[CUT_IN_CALL]} {where} ({rule.id}){LINE_QUOTE}{redact_cut(lines[-1].strip(), 300)}", Role.SYMPTOM)]
    return []


def _last_line(log: LogEvidence) -> int:
    tail = log.tail
    assert tail is not None
    return max((i for i, x in enumerate(tail.lines, tail.start_line) if x.strip()), default=tail.start_line)


def meaning(label: str) -> str:
    """The root cause's words for a stop signal; a cut traceback's come from the rule that read its frames."""
    if label.startswith(CUT_IN_CALL + ":"):
        rid = label.split(":", 1)[1]
        rule = next(r for r, *_ in compiled_exception_rules() if r.id == rid)
        return (f"{rule.meaning} The log ends in the traceback, cut before its exception line: its frames say where it "
                "was raised, not what was raised; the last lines of the job's stderr name the exception.")
    return MEANING[label]


def _signal(log: LogEvidence, line_no: int, label: str, text: str) -> Signal:
    # the report quotes the line as where it happened, after a short finding (as for a metric anomaly)
    return Signal(FailureClass.STALLED, STOP_W, "stop", label, log.source, line_no,
                  f"{FINDING[label]}{LINE_QUOTE}{redact_cut(text.strip(), 300)}", Role.SYMPTOM)
