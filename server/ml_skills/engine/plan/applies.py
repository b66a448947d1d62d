"""Whether a named fix applies to this run: one its facts rule out (a flag already set, a version that has it), or one
the evidence rules out (an OOM at evaluation, a model that cannot fit the device, a placement that fails before any batch).
"""

from __future__ import annotations

from ml_skills.catalog.loader import fixes as fix_catalog
from ml_skills.engine.plan.candidates import file_line, oom_at_eval
from ml_skills.engine.plan.facts import fact, version_below
from ml_skills.lazyre import lazy
from ml_skills.models import Classification, FailureClass, LineRef, LogEvidence, RunFact

_UNREACHABLE = lazy(r"(?i)couldn't connect|could not connect|connection|timed? ?out|offline|resolve|proxy|\bSSL|max retries|unreachable")
# the program cannot fit at all: XLA's static buffer assignment at compile time says how much it needs, before any step
_COMPILE_OOM = lazy(r"(?i)BufferAssignment|compile permanent error|Ran out of memory in memory space|during compilation|while compiling")


_OWN_CHECKPOINT = lazy(r"(?i)\bresum|\brestor|history checkpoint|(latest|last|previous) checkpoint")


def _lines_before(ref: LineRef, logs: list[LogEvidence], n: int) -> list[str]:
    for log in logs:
        if log.source == ref.source and log.tail is not None:
            rel = ref.line_no - log.tail.start_line
            return log.tail.lines[max(0, rel - n) : rel + 1] if rel >= 0 else []
    return []


def _lines_after(ref: LineRef, logs: list[LogEvidence], n: int) -> list[str]:
    for log in logs:
        if log.source == ref.source and log.tail is not None:
            rel = ref.line_no - log.tail.start_line
            return log.tail.lines[rel + 1 : rel + 1 + n] if rel >= 0 else []
    return []


def _fits_the_device(cls: Classification, logs: list[LogEvidence]) -> str | None:
    """Why a larger accelerator is not the fix (None when it is): it is only when the model cannot fit this one at all."""
    if cls.decisive is None:
        return "no out-of-memory line to read the size from"
    ran = next((lp for log in logs if log.source == cls.decisive.source and (lp := log.trajectory.last_progress) is not None), None)
    if ran is not None:
        return f"training ran before the out-of-memory (progress at {file_line(ran.source, ran.line_no)}): the model fits at some size"
    if _placing_model(cls, logs) is not None:
        return None  # the weights alone did not fit the device
    text = "\n".join([cls.decisive.text, *_lines_after(cls.decisive, logs, 3)])  # XLA prints its buffer assignment below the error
    if _COMPILE_OOM.search(text):
        return None
    return "the out-of-memory line does not say the program cannot fit the device at all (as a compile-time buffer assignment does)"


_OOM_NUMBERS = lazy(r"([\d.]+) GiB already allocated.*?([\d.]+) GiB reserved in total")
_OOM_UNALLOCATED = lazy(r"([\d.]+) GiB is allocated by PyTorch, and ([\d.]+) (GiB|MiB) is reserved by PyTorch but unallocated")


def ruled_out_by_facts(fid: str, facts: list[RunFact]) -> str | None:
    """Why the fix does not apply to this run, from what the run printed about itself; None when it may."""
    f = fix_catalog()[fid]
    for name, values in f.not_when.items():
        got = fact(facts, name)
        if got is not None and got.value in values:
            return f"{name} is {got.value} ({file_line(got.source or '', got.line_no)})"
    torch = fact(facts, "torch_version")
    if f.min_torch and torch is not None and version_below(torch.value, f.min_torch):
        return f"torch {torch.value} is older than {f.min_torch} ({file_line(torch.source or '', torch.line_no)})"
    return None


# where a model's weights are put on the device: Module.to/.cuda (nn.Module._apply), accelerate's dispatch and
# set_module_tensor_to_device, transformers' from_pretrained and its meta-model load, a state dict loaded onto the GPU
_PLACING = lazy(r"(?m):(set_module_tensor_to_device|dispatch_model|load_checkpoint_and_dispatch|_load_state_dict_into_meta_model|"
                r"from_pretrained|load_state_dict|_apply|cuda|to|_move_model_to_device|model_to_device)\s*$")
_NO_BATCH_YET = ("reduce-batch-grad-accum", "activation-checkpointing", "eval-batch-size")


def _placing_model(cls: Classification, logs: list[LogEvidence]) -> str | None:
    """The frame that was putting the model's weights on the device when it ran out of memory, before any step."""
    if cls.decisive is None or cls.primary is not FailureClass.OOM:
        return None
    for log in logs:
        if log.source != cls.decisive.source or log.trajectory.last_progress is not None:
            continue
        tb = next((t for t in log.tracebacks if t.line_no == cls.decisive.line_no), None)
        frames = [f for f in (tb.frames if tb else []) if not f.startswith(" ")]  # 'file:function', not the code lines
        if frames and (m := _PLACING.search(frames[-1])):
            return f"{frames[-1].rsplit('/', 1)[-1].split(':', 1)[0]}:{m.group(1)}"
    return None


def ruled_out_by_evidence(fid: str, cls: Classification, logs: list[LogEvidence]) -> str | None:
    """Fixes a signature names in general that the decisive line itself contradicts."""
    if fid in _NO_BATCH_YET and (where := _placing_model(cls, logs)) is not None:
        return (f"the out-of-memory came while placing the model's weights on the device ({where}), before any step: "
                "no batch or activation exists yet to shrink")
    if fid == "eval-batch-size" and not oom_at_eval(cls, logs):
        return "the out-of-memory did not come during evaluation"
    if fid == "offline-local-model" and not (cls.decisive is not None and _UNREACHABLE.search(cls.decisive.text)):
        return "the failing line does not say the Hub could not be reached"
    if fid == "larger-accelerator":
        return _fits_the_device(cls, logs)
    if fid == "redownload-verify-file" and cls.decisive is not None:
        around = _lines_before(cls.decisive, logs, 40) + _lines_after(cls.decisive, logs, 40)  # the load's context, its traceback
        own = next((x for x in around if _OWN_CHECKPOINT.search(x)), None)
        if own is not None:
            return "the file is the run's own checkpoint, being resumed from, not a download"
    if fid == "expandable-segments" and cls.decisive is not None and (sizes := _oom_sizes(cls.decisive.text)) is not None:
        allocated, spare = sizes
        if spare < 0.1 * allocated:
            return f"only {spare:.2f} GiB is reserved but unallocated: little fragmentation to recover"
    return None


def _oom_sizes(text: str) -> tuple[float, float] | None:
    """(GiB allocated, GiB reserved but unallocated) as PyTorch's out-of-memory message states them; None when it states
    neither, or states them in digits and dots that are no number ('1.2.3 GiB', '.. GiB': before the twenty-sixth round
    float() raised on them and the diagnosis ended in 'internal error', exit 3)."""
    old, new = _OOM_NUMBERS.search(text), _OOM_UNALLOCATED.search(text)
    try:
        if old:
            return float(old.group(1)), float(old.group(2)) - float(old.group(1))
        if new:
            return float(new.group(1)), float(new.group(2)) / (1024 if new.group(3) == "MiB" else 1)
    except ValueError:
        return None
    return None
