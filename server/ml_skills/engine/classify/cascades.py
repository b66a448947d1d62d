"""Cascade rules: how one failure surfaces as several signals, and which of them leads.

Run by classify after every signal is weighed: a generic exit code or native abort that follows a
specific failure is how that failure surfaced; a NaN or blow-up followed by a CUDA fault went first.
"""

from __future__ import annotations

from functools import cache

from ml_skills.catalog.loader import signatures
from ml_skills.engine.classify.signals import MIN_PRIMARY, ROLE_W, SEV_W, SURVIVED, Signal
from ml_skills.engine.classify.terminal import last_progress_line
from ml_skills.lazyre import lazy
from ml_skills.models import FailureClass, LogEvidence, Role, Severity

# Generic errors whose own message goes on to name the failure, and over how many lines: a C++ abort's
# what() (same line or the next), an NCCL error's 'Last error:' detail (up to three lines below it).
NATIVE_ABORT = "abort-native"  # names only the mechanism (an uncaught C++ exception), never what failed
CARRIES = {NATIVE_ABORT: 1, "nccl-error": 3}
# only the C++ runtime's abort prints a message after it (its what()); glibc's heap checks ('free(): corrupted
# unsorted chunks'), 'Aborted (core dumped)' or an illegal instruction name the failure themselves, and the line
# after them is another process reacting (a peer's 'Connection closed by localRank 0', the agent's SIGTERM)
_CPP_ABORT = lazy(r"(?i)terminate called")


@cache
def generic_signatures() -> frozenset[str]:
    """Signatures that say how a failure surfaced (an exit code, a signal), not what failed."""
    return frozenset(s.id for s in signatures() if s.generic)



def generic_after_specific(signals: list[Signal]) -> None:
    """A launcher's exit code or a native abort that follows a specific failure is how that failure surfaced.

    torchrun reports a rank that the NCCL watchdog aborted as 'exitcode: -6', a DataLoader worker that hit
    a full /dev/shm dies of a bus error, and the C++ runtime prints 'terminate called' for an exception
    that was already logged: such lines name a signal, not a cause. When a specific signal of another
    class (weight >= MIN_PRIMARY, not survived, not a warning) comes earlier in the same log or on the
    same line, the generic one becomes a symptom, so it neither wins nor takes the root-cause lead.
    """
    generic = generic_signatures()
    specific = [s for s in signals if s.label not in generic and s.role is not Role.HINT and not s.survived
                and not s.warning and s.weight >= MIN_PRIMARY and s.line_no is not None]
    carried = [s for s in signals if s.kind == "signature" and s.label != NATIVE_ABORT and s.role is not Role.HINT
               and not s.survived and not s.warning and s.line_no is not None]
    for g in signals:
        if g.kind != "signature" or g.label not in generic or g.line_no is None:
            continue
        # 'terminate called after throwing ...' is how an uncaught C++ exception ends the process, and NCCL's
        # error only reports what its 'Last error:' then names: the failure named inside the message (even a
        # generic one, an NCCL error inside an abort) is the one to follow
        span = CARRIES.get(g.label)
        if g.label == NATIVE_ABORT and not _CPP_ABORT.search(g.text):
            span = None
        if span is not None and any(s.source == g.source and s.failure_class != g.failure_class
                                    and (g.line_no <= (s.line_no or 0) <= g.line_no + span or _its_what(g, s)) for s in carried):
            # a native abort names only the mechanism, so it stays below what it carries even when that is
            # itself a symptom (a collective timeout in what()); an NCCL error's own words still count
            target = Role.HINT if g.label == NATIVE_ABORT else Role.SYMPTOM
            if ROLE_W[g.role] > ROLE_W[target]:
                g.weight *= ROLE_W[target] / ROLE_W[g.role]
                g.role = target
            continue
        before = [s for s in specific if s.source == g.source and s.failure_class != g.failure_class and (s.line_no or 0) <= g.line_no]
        if before:
            # after an exception of the run's own that its peers echo (a rank's shape error, then the others' 'Connection
            # closed by peer'), an abort and the launcher's report of its signal are how that rank's exit surfaced: at
            # exit a joinable gloo thread prints 'terminate called without an active exception', and the agent reports
            # SIGABRT twice; three such lines outweighed the exception in about one run of twelve (trial 8's case01)
            own = any(s.label == "traceback:unclassified-exception" and s.role is Role.CAUSE for s in before)
            target = Role.HINT if own else Role.SYMPTOM
            if ROLE_W[g.role] > ROLE_W[target]:
                g.weight *= ROLE_W[target] / ROLE_W[g.role]
                g.role = target
            else:
                g.weight *= 0.5


def _its_what(abort: Signal, s: Signal) -> bool:
    """The abort's own what() line a few lines below it: two processes' 'terminate called' lines interleaved push it
    down (the first process's quote closed on a line of its own)."""
    return abort.label == NATIVE_ABORT and abort.line_no is not None and s.line_no is not None \
        and abort.line_no < s.line_no <= abort.line_no + 3 and "what():" in s.text


def numeric_before_crash(signals: list[Signal]) -> None:
    """A NaN or an exploding loss followed by a CUDA fault: the numbers went first, the crash followed.

    Non-finite or huge values reach index and ROI kernels as garbage indices, so a run that
    explodes numerically often dies a few steps later with an illegal memory access or a
    device-side assert. When the anomaly precedes the crash in the same log, the anomaly takes
    the lead that the crash would otherwise get as the first terminal cause.
    """
    numeric = [s for s in signals if s.kind == "anomaly" and s.label in ("nan-onset", "loss-blowup") and s.role is Role.CAUSE]
    crashes = [s for s in signals if s.failure_class is FailureClass.CUDA_RUNTIME and s.role is Role.CAUSE and not s.survived]
    for n in numeric:
        after = [c for c in crashes if c.source == n.source and (c.line_no or 0) > (n.line_no or 0)]
        if after:
            n.weight *= 1.3
            for c in after:
                c.weight /= 1.3
            return


# Anomalies that describe how training went, not an event that stops a process: a loss that rose, froze or
# spiked, a slow throughput, a validation curve. A NaN is not among them (a run computing NaN is finished as a
# run, whatever kills it later); a blow-up followed by a CUDA fault is numeric_before_crash's case.
_CANNOT_END = frozenset({"loss-blowup", "grad-norm-spike", "loss-frozen", "throughput-collapse", "train-val-divergence",
                         "early-perfect-validation", "validation-metric-near-zero", "validation-metric-frozen",
                         "eval-on-train-data"})
CONTRIBUTING_W = 0.3


def _bare_stop(s: Signal) -> bool:
    """A stop that does not say why: a Ctrl-C, a SIGTERM/SIGKILL, an exit code. A person or a scheduler may have
    stopped the run because of the very trend in its metrics (600 epochs at a loss of 1e31, then a kill)."""
    label = s.label.removeprefix("traceback:")  # torchrun's SignalException for a SIGTERM, read by its signal line
    return label in generic_signatures() or label in _BARE_STOPS or s.label.endswith(":user-interrupt")


_BARE_STOPS = frozenset({"sigkill-exit-137", "sigkill-external"})


def anomalies_below_the_ending(signals: list[Signal]) -> None:
    """A trend in the metrics does not end a run; when something else ended it, the trend only contributed.

    When the log ends in a fatal event of another class after the anomaly (an exception, a peer's collective
    error; not survived, not a warning, not a bare stop that gives no reason), that event is what stopped the run, and the anomaly can
    at most have led to it: it becomes a hint, so it is reported as a contributing factor and never outranks
    the ending. A blow-up that itself raised (a NaN guard, a divergence check) has a traceback of its own class.
    """
    ends = [s for s in signals if s.kind in ("signature", "traceback") and s.role is not Role.HINT and not s.survived
            and not s.warning and s.weight >= MIN_PRIMARY and s.line_no is not None and not _bare_stop(s)]
    for a in signals:
        if a.kind != "anomaly" or a.label not in _CANNOT_END or a.line_no is None:
            continue
        later = [e for e in ends if e.source == a.source and (e.line_no or 0) > a.line_no]
        if later and not any(e.failure_class == a.failure_class for e in later) and \
                not any(e.failure_class is FailureClass.CUDA_RUNTIME for e in later):
            a.weight *= CONTRIBUTING_W
            a.role = Role.HINT


def stall_before_a_stop(signals: list[Signal]) -> None:
    """A run that stopped stepping and was then killed was hung: the kill ended the hang (engine/analyse/lastprogress
    .stalled_before_kill), so a trend in the metrics before it (a validation curve, a slow loss) only contributed."""
    for st in (a for a in signals if a.kind == "anomaly" and a.label == "no-progress" and a.line_no is not None):
        if not any(_bare_stop(s) and s.source == st.source and (s.line_no or 0) > (st.line_no or 0) for s in signals):
            continue
        for a in signals:
            if a.kind == "anomaly" and a.label in _CANNOT_END and a.source == st.source and a.role is not Role.HINT:
                a.weight *= CONTRIBUTING_W
                a.role = Role.HINT


# readings that describe the run up to its last logs: it was going nowhere when it was stopped
_TO_THE_END = frozenset({"learning-rate-zero", "loss-frozen", "validation-metric-frozen"})


def stopped_going_nowhere(signals: list[Signal]) -> None:
    """A bare stop (a SIGTERM, a kill, a Ctrl-C) after the metrics showed, up to their last logs, a run going nowhere: the
    stop counts for half. It says only that someone or something ended the run; the learning rate at 0 for thirty
    epochs before it (1305: a PaddleDetection run resumed past its schedule, then SIGTERMed) says what was wrong."""
    nowhere = [a for a in signals if a.kind == "anomaly" and a.label in _TO_THE_END and a.role is not Role.HINT and a.line_no]
    for s in signals:
        if _bare_stop(s) and not s.survived and s.line_no is not None and any(
                a.source == s.source and (a.line_no or 0) < s.line_no for a in nowhere):
            s.weight *= 0.5


# How peers see a rank that died: its sockets close (Gloo, TF's gRPC), NCCL's service thread reports the
# closed connection, the launcher sends the survivors SIGTERM. A death that explains them: a kill or a crash
# of the rank itself (SIGKILL, SIGSEGV), not the SIGABRT/SIGTERM that a peer's own watchdog or launcher sends.
_PEER_REACTIONS = frozenset({"gloo-peer-failure", "peer-rank-terminated", "tf-grpc-peer-unavailable"})
_DEATHS = frozenset({"sigkill-exit-137", "sigkill-external", "segfault"})


def peers_follow_a_death(signals: list[Signal]) -> None:
    """Peers' connection errors after a rank was killed or crashed are how they saw that death.

    A rank killed by SIGKILL (the OOM killer, a scheduler) or crashed by SIGSEGV prints nothing itself; its
    peers then fail loudly in the next collective ('Connection reset by peer', 'Connection closed by
    localRank') and the launcher reports the dead rank's exit code. The loud lines are the symptom, the
    death is the terminal event of the first failing rank: the reactions count for half.
    """
    deaths = [s for s in signals if s.label in _DEATHS and not s.survived and s.line_no is not None]
    if not deaths:
        return
    for s in signals:
        if s.label.removeprefix("traceback:") in _PEER_REACTIONS and any(d.source == s.source for d in deaths):
            s.weight *= 0.5


# Classes of an error in the run's own code that no peer's death can raise: a NameError, a missing key or file, a
# shape the collate function rejects. Collective errors, timeouts and connection resets are how peers see a death.
_OWN_ERRORS = frozenset({FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT})


# a SIGTERM a process got from outside, as Paddle's, torchrun's and the shell's reports of it read
_TERM = lazy(r"(?i)sigterm|termination signal|\bterminated\b|signal:? 15\b")


def _a_termination(s: Signal) -> bool:
    return s.label.removeprefix("traceback:") == "killed-by-signal" and bool(_TERM.search(s.text))


def own_error_before_a_kill(signals: list[Signal]) -> None:
    """A rank's own exception before a bare SIGKILL or SIGTERM the launcher reports: the exception ended the run.

    torchrun and accelerate report the rank they found dead ('exitcode: -9 ... Signal 9 (SIGKILL)'), which need
    not be the rank that failed: rank 0 raising a NameError leaves the others blocked in the next collective until
    the launcher's teardown or the scheduler kills them. A kill says nothing of why; an error of the run's own code
    that came before it, and that no peer's death can cause, is the first failure: the kills count for half, and
    the peers' connection errors after it too (trial 8's case01: rank 3's shape error, then three ranks' gloo errors).
    A SIGTERM is how Paddle's launcher stops the others once one has failed (1328: libnccl.so missing, then the
    'Termination signal' report of the process it took down).
    """
    kills = [s for s in signals if (s.label in _BARE_STOPS or _a_termination(s)) and not s.survived and s.line_no is not None]
    own = [s for s in signals if s.kind == "traceback" and s.failure_class in _OWN_ERRORS and not s.survived
           and not s.warning and s.weight >= MIN_PRIMARY and s.line_no is not None]
    for k in kills:
        if any(o.source == k.source and (o.line_no or 0) < (k.line_no or 0) for o in own):
            k.weight *= 0.5
    # ...and so do the peers' reactions to it ('Connection closed by peer ... a remote worker crashing' on each
    # other rank): how they saw that rank's exit, as peers_follow_a_death reads them after a kill
    own_causes = [o for o in own if o.role is Role.CAUSE]
    for s in signals:
        if s.label.removeprefix("traceback:") in _PEER_REACTIONS and s.line_no is not None and any(
                o.source == s.source and (o.line_no or 0) < s.line_no for o in own_causes):
            s.weight *= 0.5


def after_the_teardown(signals: list[Signal]) -> None:
    """Exceptions raised after the launcher began tearing down the survivors, when a process's own exception came
    before the teardown: the survivors' reactions to being stopped, which count for half.

    torchrun's agent sends every surviving worker a signal once one has failed ('Sending process 27324 closing signal
    SIGTERM', CTRL_C_EVENT on Windows); each survivor is stopped wherever it is, and what it prints then (the
    FileNotFoundError of a cache scan cut short, the IndexError of a pool interrupted mid-way) is how it was stopped,
    not why the run failed (1310: the one rank's gloo RuntimeError, then the other's labels.cache chain)."""
    downs = [s for s in signals if s.label == "peer-rank-terminated" and "closing signal" in s.text and s.line_no is not None]
    own = [s for s in signals if s.kind == "traceback" and s.role is Role.CAUSE and not s.survived and not s.warning
           and s.weight >= MIN_PRIMARY and s.line_no is not None]
    for d in downs:
        if any(o.source == d.source and (o.line_no or 0) < (d.line_no or 0) for o in own):
            for s in signals:
                if s.kind == "traceback" and s.source == d.source and (s.line_no or 0) > (d.line_no or 0):
                    s.weight *= 0.5
            return


TEARDOWN_LINES = 60  # how far below an uncaught exception a native crash is still the interpreter's exit (Paddle's C++ traceback)


def native_crash_at_exit(signals: list[Signal], logs: list[LogEvidence]) -> None:
    """A segfault reported just below an uncaught exception of the run's own code, with no progress between, is how
    that process exited, not a second failure: Paddle prints its C++ traceback and 'FatalError: Segmentation fault'
    as the interpreter tears down after the Python traceback (1394: an empty image in the DataLoader, then 'Blocking
    queue is killed', then the segfault), and native extensions crash the same way at exit. The segfault becomes a
    symptom of the exception; a native abort there, and the launcher's report of it, only hints."""
    last = {log.source: last_progress_line(log) for log in logs}
    own = [s for s in signals if s.kind == "traceback" and s.failure_class in _OWN_ERRORS and s.role is Role.CAUSE
           and not s.survived and not s.warning and s.weight >= MIN_PRIMARY and s.line_no is not None]
    for g in signals:
        if g.label != "segfault" or g.line_no is None or g.role is not Role.CAUSE or g.survived:
            continue
        lp = last.get(g.source)
        if any(o.source == g.source and 0 < g.line_no - (o.line_no or 0) <= TEARDOWN_LINES
               and (lp is None or lp < (o.line_no or 0)) for o in own):
            g.weight *= ROLE_W[Role.SYMPTOM] / ROLE_W[Role.CAUSE]
            g.role = Role.SYMPTOM
    # a native abort right below the exception ('terminate called without an active exception': C++ threads torn down as
    # the interpreter exits) is that process's exit, and the launcher's 'exitcode: -6 (SIGABRT)' for it reports the same
    # exit: hints, however many lines repeat it (a rank's shape error, then its abort, then torchrun's summary), and a hint
    # never outweighs the exception it follows: a script launched three times, each launch's ValueError then 'terminate
    # called' and SIGABRT, summed five boosted aborts past the two exceptions (2428, read process-crash)
    aborts = [g for g in signals if g.label == NATIVE_ABORT and g.line_no is not None and not g.survived]
    first = min(aborts, key=lambda g: g.line_no or 0, default=None)
    before = [o for o in own if first is not None and o.source == first.source and 0 < (first.line_no or 0) - (o.line_no or 0) <= TEARDOWN_LINES
              and not (o.line_no or 0) < (last.get(first.source) or 0) < (first.line_no or 0)]
    if first is not None and before:
        cap = max(o.weight for o in before)
        for g in aborts:
            if g.source == first.source:
                g.weight = min(g.weight, cap) * CONTRIBUTING_W
                g.role = Role.HINT


EXTERNAL_KILL = "sigkill-external"


def _memory_flat(logs: list[LogEvidence]) -> tuple[bool, str]:
    for log in logs:
        for s in log.trajectory.series:
            if s.name == "mem" and s.count >= 4 and s.min and s.max is not None and s.min > 0 and s.max / s.min < 1.3:
                return True, f"logged memory stayed flat ({s.min:.4g}-{s.max:.4g}) up to the kill"
    return False, ""


def lead_the_ending(signals: list[Signal], logs: list[LogEvidence]) -> None:
    """Give the signal that most likely ended the run a lead of 1.3x.

    The first cause after the last progress is the likely root of a cascade. A cause with progress lines after it
    (fewer than make it 'survived') did not end the run when one comes after the progress. With no cause anywhere,
    the strongest symptom is what ended the run (a bare 'Killed' or exit status 137 from the OOM killer, a
    launcher's exit code)."""
    terminal = [s for s in signals if s.role is Role.CAUSE and not s.survived and not s.warning and s.line_no is not None]
    progress_at = {log.source: lp for log in logs if (lp := last_progress_line(log)) is not None}
    after = [s for s in terminal if s.kind == "anomaly" or (s.line_no or 0) >= progress_at.get(s.source, 0)]
    terminal = after or terminal
    if terminal:
        # every cause on the first cause line gets the lead (one line can name two classes, e.g. TF's
        # 'Model diverged with loss = NaN.'): which one the matcher listed first must not decide
        first_line: dict[str, int] = {}
        for s in terminal:
            first_line[s.source] = min(first_line.get(s.source, s.line_no or 0), s.line_no or 0)
        for s in terminal:
            if s.line_no == first_line[s.source]:
                s.weight *= 1.3
    else:
        ends = [s for s in signals if s.role is Role.SYMPTOM and s.kind == "signature" and not s.survived and not s.warning]
        if ends:
            max(ends, key=lambda s: (s.weight, -(s.line_no or 0))).weight *= 1.3


def external_kill(signals: list[Signal], logs: list[LogEvidence]) -> list[str]:
    """Exit 137 with flat memory is an external SIGKILL, not an OOM: the kill itself is then the failure (a
    scheduler, a preemption, a watchdog or a person), so it becomes a process-crash cause. Returns the notes."""
    notes: list[str] = []
    if any(s.failure_class is FailureClass.OOM and s.role is Role.CAUSE for s in signals):
        return notes
    flat, why = _memory_flat(logs)
    if not flat:
        return notes
    for s in signals:
        if s.failure_class is FailureClass.OOM and s.label == "sigkill-exit-137":
            s.failure_class = FailureClass.PROCESS_CRASH
            s.label = EXTERNAL_KILL
            s.role = Role.CAUSE
            s.weight = max(s.weight, ROLE_W[Role.CAUSE] * SEV_W[Severity.SIGNIFICANT] * (SURVIVED if s.survived else 1.0))
            s.text += f" ({why})"
            notes.append(f"SIGKILL without memory pressure: {why}")
    return notes
