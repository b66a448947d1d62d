"""A fix's exact command: the run's own launch command, split into words and rewritten (resumed from a checkpoint,
a lower learning rate), or the diagnostic a fix runs, filled in from the evidence.
"""

from __future__ import annotations

import re
import shlex

from ml_skills.engine.plan.facts import fact
from ml_skills.lazyre import lazy
from ml_skills.models import ArtifactInventory, LogEvidence, RunFact

_RESUME_FLAG = lazy(r"--(?:resume[\w-]*|resume_from_checkpoint|ckpt_path|load_checkpoint|checkpoint|init_from|restore[\w-]*)")
_LR_FLAG = lazy(r"--(?:lr|learning[-_]rate)")
_NUMBER = lazy(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")
_OPERATOR = set("();<>|&")


def launch_words(launch_command: str) -> list[str] | None:
    """The words of a launch command, or None when it is not one simple command.

    The command comes from the run's own files or log, which anyone who can print a line can
    write: `python train.py --lr 0.1; curl ... | sh` is a launch line followed by a second
    command. A line with a shell operator outside quotes (`;`, `&&`, `|`, `>`, a subshell) is not
    a launch we rebuild; every command built from one is `shlex.join` of its words, so nothing in
    it (`$(...)`, backticks, `$VAR`) is run by the shell that pastes it."""
    lex = shlex.shlex(launch_command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # an unclosed quote
        return None
    if not words or any(w and set(w) <= _OPERATOR for w in words) or any("\n" in w or "\r" in w for w in words):
        return None
    return words


def safe_launch(launch_command: str | None) -> str | None:
    """The launch command re-quoted word by word (see launch_words), or None when it is not one simple command."""
    words = launch_words(launch_command) if launch_command else None
    return shlex.join(words) if words else None


def resume_command(launch_command: str, ckpt: str) -> str | None:
    """The original command with its resume flag pointed at `ckpt`, or None if it has no such flag."""
    words = launch_words(launch_command)
    for i, w in enumerate(words or []):
        flag, eq, _ = w.partition("=")
        if not _RESUME_FLAG.fullmatch(flag):
            continue
        assert words is not None
        if eq:
            words[i] = f"{flag}={ckpt}"
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            words[i + 1] = ckpt
        else:
            words.insert(i + 1, ckpt)
        return shlex.join(words)
    return None


def lower_lr_command(launch_command: str, factor: float = 3.0) -> str | None:
    """The original command with its learning-rate flag divided by `factor`, or None if it has none."""
    words = launch_words(launch_command)
    for i, w in enumerate(words or []):
        flag, eq, value = w.partition("=")
        if not _LR_FLAG.fullmatch(flag):
            continue
        assert words is not None
        if eq and _NUMBER.fullmatch(value):
            words[i] = f"{flag}={float(value) / factor:.3g}"
        elif not eq and i + 1 < len(words) and _NUMBER.fullmatch(words[i + 1]):
            words[i + 1] = f"{float(words[i + 1]) / factor:.3g}"
        else:
            continue
        return shlex.join(words)
    return None


def _script(launch: str | None) -> str | None:
    m = re.search(r"(\S+\.py)\b|-m\s+([\w.]+)", launch or "")
    return (m.group(1) or m.group(2)) if m else None


def command_for(fid: str, inv: ArtifactInventory | None, launch: str | None, logs: list[LogEvidence],
                 facts: list[RunFact]) -> str | None:
    launch = safe_launch(launch or (lc.value if (lc := fact(facts, "launch_command")) else None))
    if fid == "lower-lr-add-warmup" and launch:
        cmd = lower_lr_command(launch)
        ckpt = inv.newest_valid_checkpoint if inv else None
        if cmd and ckpt:
            cmd = resume_command(cmd, ckpt) or cmd
        return cmd
    if fid == "dump-stacks":
        script = _script(launch)
        target = f"pgrep -f {shlex.quote(script)}" if script else "pgrep -f python"
        return f"for p in $({target}); do py-spy dump --pid $p; done   # one stack per process (pip install py-spy)"
    if fid == "resume-valid-checkpoint" and inv and inv.newest_valid_checkpoint:
        if launch:
            cmd = resume_command(launch, inv.newest_valid_checkpoint)
            if cmd:
                return cmd
            return f"{launch}  # add your trainer's resume flag pointing at {shlex.quote(inv.newest_valid_checkpoint)}"
        return f"# resume from {shlex.quote(inv.newest_valid_checkpoint)} with the original, unchanged command"
    if fid == "check-kernel-oom":
        return "dmesg -T | grep -i -E 'killed process|out of memory|oom-kill'"
    if fid == "nccl-debug" and launch:
        return f"NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET TORCH_DISTRIBUTED_DEBUG=DETAIL {launch}"
    if fid == "cuda-launch-blocking" and launch:
        return f"CUDA_LAUNCH_BLOCKING=1 {launch}"
    if fid == "faulthandler-stack" and launch:
        return f"PYTHONFAULTHANDLER=1 {launch}"
    if fid == "check-gpu-health":
        return "nvidia-smi -q -d ECC,PAGE_RETIREMENT; dmesg -T | grep -i xid"
    if fid == "free-shared-gpu":
        return "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv   # who else holds the GPU"
    if fid == "find-first-failing-rank" and len(logs) > 1:
        return "grep -n -m1 -E 'Error|Traceback|Killed' " + " ".join(shlex.quote(x.source) for x in logs)
    return None
