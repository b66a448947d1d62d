"""Which probes a failure gets, from its class and its decisive evidence (the traceback it belongs to, the lines
above it, their frames).
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.plan.facts import fact
from ml_skills.engine.plan.probes.clouds import aws, azure, gcp, http_refusal
from ml_skills.engine.plan.probes.config import config
from ml_skills.engine.plan.probes.crashes import crash_pid, cuda_stack, launch_blocking
from ml_skills.engine.plan.probes.exceptions import imports, library, own_line, version_of
from ml_skills.engine.plan.probes.memory import memory, smaller_batch_command
from ml_skills.engine.plan.probes.orchestrators import orchestrator
from ml_skills.engine.plan.probes.storage import paths
from ml_skills.engine.read import excerpts
from ml_skills.lazyre import lazy
from ml_skills.models import Classification, FailureClass, LogEvidence, RunFact, TracebackEvent

# A frame's line, after any non-word prefix (a rank's '[rank1]: '). `^\W*(?:\[rank\d+\]:\s*)?\s*File` tried every split of a
# line's leading whitespace between `\W*` and `\s*` (both take it): 23 ms for a line of 2,000 no-break or ideographic spaces,
# and 500 such lines above a traceback held the CLI 4-5x a control of letters (twenty-seventh round). The same language,
# each run read by one quantifier (the same matches and groups on 400,000 random strings).
_FRAME = lazy(r'^(?:\W*\[rank\d+\]:\s*+|\W*+)File "([^"\n]{1,300})", line (\d{1,7}), in ([\w.<>]{1,120})')
_IMPORT_KIND = lazy(r"ModuleNotFoundError|ImportError")


def _traceback_at(logs: list[LogEvidence], cls: Classification) -> TracebackEvent | None:
    """The exception the decisive line belongs to, or the log's last one when the decisive line is none's."""
    tbs = [t for log in logs for t in log.tracebacks]
    if not tbs:
        return None
    d = cls.decisive
    if d is not None:
        near = [t for t in tbs if t.source == d.source and t.start_line - 3 <= d.line_no <= t.line_no + 3]
        if near:
            return near[-1]
    return tbs[-1]


def _above(logs: list[LogEvidence], cls: Classification, tb: TracebackEvent | None, tail: list[str], n: int = 80) -> list[str]:
    """The lines up to the decisive one (or to the end of its traceback, when a worker's re-raise comes first and its original
    traceback after): read from the log file when it is one, else from the excerpts the scan kept."""
    d = cls.decisive
    if d is None:
        return tail
    end = max(d.line_no, tb.line_no if tb is not None and tb.source == d.source and tb.line_no - d.line_no <= n else 0)
    log = next((lg for lg in logs if lg.source == d.source), None)
    if log is not None and Path(d.source).is_file():
        try:
            ex = excerpts.excerpt_around(log, d.line_no, n, end - d.line_no)  # seeks by the scan's byte offsets
            return ex.lines[: max(0, end - ex.start_line + 1)]
        except (OSError, ValueError):
            pass
    kept = {ex.start_line + i: text for log in logs if log.source == d.source for ex in (log.head, log.tail) if ex
            for i, text in enumerate(ex.lines)}
    above = [kept[k] for k in sorted(kept) if d.line_no - n <= k <= end]
    return above or tail


def _frames(lines: list[str]) -> list[tuple[str, int, str]]:
    """(file, line, function) of the frames printed in these lines, outermost first."""
    return [(m.group(1), int(m.group(2)), m.group(3)) for line in lines if (m := _FRAME.match(line)) is not None]


def probe_commands(cls: Classification, logs: list[LogEvidence], facts: list[RunFact], decisive: str, tail: list[str]) -> list[str]:
    """The commands that decide this failure's kind, filled in from its evidence; [] when none fits or a name is missing."""
    primary = cls.primary
    d = cls.decisive
    sig = next((h.signature_id for log in logs for h in log.hits if d is not None and h.source == d.source and h.line_no == d.line_no),
               None)
    text = "\n".join([decisive, *tail[-40:]])
    tb = _traceback_at(logs, cls)
    above = _above(logs, cls, tb, tail)
    frames = _frames(above)
    out: list[str] = []
    if primary is FailureClass.OOM:
        launch = fact(facts, "launch_command")
        if (cmd := smaller_batch_command(launch.value if launch else None)) is not None:
            out.append(cmd)
        out += memory(sig, "\n".join([decisive, *tail[-12:]]))
    if primary in (FailureClass.CLOUD_PERMISSIONS_QUOTA, FailureClass.PIPELINE_ORCHESTRATION, FailureClass.CONFIG_ERROR, None):
        out += gcp(text) + aws(text) + azure(text) + http_refusal(text)
    if primary in (FailureClass.PIPELINE_ORCHESTRATION, FailureClass.CLOUD_PERMISSIONS_QUOTA, None) or (
            primary is FailureClass.OOM and not out):
        out += orchestrator(text)
    if primary in (FailureClass.PROCESS_CRASH, FailureClass.CUDA_RUNTIME, FailureClass.NCCL_DISTRIBUTED, None):
        out += crash_pid(text)
    if primary is FailureClass.CUDA_RUNTIME:
        out += cuda_stack(text)
        if sig in ("device-side-assert", "illegal-memory-access") or "device-side assert" in decisive:
            out += launch_blocking(above, tail)
    if primary is FailureClass.CONFIG_ERROR:
        out += config(sig, decisive, above)
    exc = "\n".join([decisive, *([f"{tb.exc_type}: {tb.message}"] if tb else [])])
    if primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.PIPELINE_ORCHESTRATION, None) and (
            _IMPORT_KIND.search(exc) or "GLIBC" in exc or "pip install" in exc):
        out += imports(exc)
    if primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT, FailureClass.EVALUATION_MISMATCH,
                   FailureClass.PIPELINE_ORCHESTRATION, None):
        out += paths("\n".join([decisive, exc, *tail[-6:]]), frames, tail, above, primary)
    if not out and primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT,
                               FailureClass.EVALUATION_MISMATCH, FailureClass.PIPELINE_ORCHESTRATION):
        # the run's own file, when the log is a local file: a cloud job's source (vertex:..., a tracker's) ran its code elsewhere
        own = own_line(frames) if d is not None and Path(d.source).is_file() else None
        lib = library(tb, frames, exc) if primary is FailureClass.CONFIG_ERROR else None
        out += [c for c in (version_of(lib) if lib else None, own) if c]
    return list(dict.fromkeys(out))
