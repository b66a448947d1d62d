"""What a run says about itself: precision, lr, clipping, batch sizes, world size, versions, sizes, saves.

Runs print their configuration near the start (HF TrainingArguments, argparse Namespace lines,
Lightning's precision line, DeepSpeed's config print, `Num examples = ...`) and their saves as
they go. Contributing factors and fix conditions are these facts, each cited by its line, never a
guess: a fact not printed is simply absent, and a fix conditioned on it then still applies.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import cache
from itertools import accumulate

from ml_skills.engine.read import matcher
from ml_skills.lazyre import lazy
from ml_skills.models import FailureClass, LogEvidence, RunFact

_SEP = r"[\"']?\s*[:=]\s*[\"']?"  # key: value, key=value, "key": "value"
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

# (fact, value or None to take group 1, pattern); the first match of a fact wins, head first
_PRECISION = [
    ("bf16", lazy(r"\bbf16" + _SEP + r"(?:True|true|1)\b|Using bfloat16 (?:native )?Automatic Mixed Precision|"
                        r"precision" + _SEP + r"(?:bf16(?:-mixed|-true)?)\b|mixed_precision" + _SEP + r"bf16|\"bf16\":\s*\{\s*\"enabled\":\s*true|"
                        r"(?:^|\s)--bf16(?:\s|$)")),
    ("fp16", lazy(r"\bfp16" + _SEP + r"(?:True|true|1)\b|Using 16bit (?:native )?Automatic Mixed Precision|"
                        r"precision" + _SEP + r"(?:16(?:-mixed|-true)?)\b|mixed_precision" + _SEP + r"fp16|\"fp16\":\s*\{\s*\"enabled\":\s*true|"
                        r"(?:^|\s)--fp16(?:\s|$)|\b(?:use_)?amp" + _SEP + r"(?:True|true)\b|(?:^|\s)--amp(?:\s|$)")),
    ("fp32", lazy(r"precision" + _SEP + r"(?:32(?:-true)?|64)\b|mixed_precision" + _SEP + r"no\b")),
]
_HF_FP16_OFF = lazy(r"\bfp16=False\b")
_HF_BF16_OFF = lazy(r"\bbf16=False\b")

_FACTS: list[tuple[str, re.Pattern[str]]] = [
    ("learning_rate", lazy(r"(?:\b(?:learning_rate|lr|base_lr|max_lr|peak_lr)" + _SEP + r"|--(?:lr|learning[-_]rate)[ =])" + _NUM)),
    ("warmup", lazy(r"\b(?P<key>warmup(?:_steps|_ratio|_iters|_epochs)?)" + _SEP + _NUM)),
    ("batch_size", lazy(r"\b(?P<key>per_device_train_batch_size|train_batch_size|train_micro_batch_size_per_gpu|micro_batch_size|"
                              r"global_batch_size|batch_size)" + _SEP + r"(\d+)|(Total train batch size \([^)]*\) = [\d,]+|"
                              r"Instantaneous batch size per device = \d+)|--batch[-_]size[ =](\d+)")),
    ("grad_accumulation", lazy(r"\b(?:gradient_accumulation_steps|accumulate_grad_batches|grad_accum\w*)" + _SEP + r"(\d+)|"
                                     r"Gradient Accumulation steps = (\d+)")),
    ("world_size", lazy(r"\bworld[_ ]size" + _SEP + r"(\d+)|GLOBAL_RANK: \d+, MEMBER: \d+/(\d+)|\bnum_processes" + _SEP + r"(\d+)|"
                              r"--nproc[-_]per[-_]node[ =](\d+)")),
    ("torch_version", lazy(r"(?i)\b(?:pytorch|torch)(?: version)?(?:==|:|\s)\s*v?(\d+\.\d+(?:\.\d+)?(?:\+\w+)?)\b")),
    ("dataset_size", lazy(r"(?i)\b((?:num(?:ber of)? (?:train(?:ing)? |eval(?:uation)? |val(?:idation)? |test )?(?:examples|samples|images)"
                                r"|(?:train(?:ing)?|val(?:idation)?|test|eval) (?:dataset|set|split) size|len\((?:train|val|test)_dataset\))"
                                r"\s*[:=]?\s*[\d,]{2,}|Found [\d,]+ (?:images|files|samples) belonging to \d+ classes)")),
]
_CLIP = lazy(r"\b(max_grad_norm|gradient_clip_val|grad_clip(?:_norm)?|clip_grad(?:_norm)?|gradient_clipping|clip[-_]grad|max[-_]grad[-_]norm)"
                   r"(?:" + _SEP + r"|\s+)([0-9.eE+-]+|None|null|False|false)")
_LAUNCH = lazy(r"^\s*(?:\+\s+|\$\s+)?((?:[A-Z_]+=\S+\s+)*(?:(?:\S*/)?python[\d.]*(?:\s+-u)?\s+(?:-m\s+[\w.]+|\S+\.py)|"
                     r"(?:torchrun|deepspeed|accelerate launch|horovodrun|mpirun|srun)\s+-*\w)(?!.*: error\b).*)$")
_SAVED_PATH = lazy(r"(?:\bto|\bat|\bin|:)\s+['\"]?(/?[\w.~-]+(?:/[\w.=~-]+)+/?|[\w.=-]+\.(?:pt|pth|ckpt|bin|safetensors|h5|keras|pkl|npz))['\"]?")
_SAVED_STEP = lazy(r"(?i)(?:checkpoint-|step[_=-]?|iter(?:ation)?[_ =-]?|global_step|epoch[_=]?)\s*(\d+)")
_NOT_A_SAVE = lazy(r"(?i)error|fail|exception|traceback|unable|cannot|could not|warning")
KEPT = {"dataset_size": 3, "checkpoint_saved": 5}
# one cheap test per line before the fact patterns: a line none of whose words could start a fact is skipped
_GATE_WORDS = (r"fp16|bf16|precision|\blr\b|learning|warmup|batch|accum|world|member|processes|nproc|torch|"
               r"examples|samples|images|size|clip|grad|\bamp\b|python|deepspeed|accelerate|srun|mpirun|horovod")
_GATE = lazy("(?i)" + _GATE_WORDS)
# The same test on ASCII text, lower-cased first: `re` tries a (?i) alternation at every position, while a
# case-sensitive one skips positions by its first letters (31 to 9 us a line); on ASCII text (?i) folds A-Z only,
# so the two agree. Other text is tested with _GATE itself (its (?i) folds 'K' to k, 'ſ' to s).
_GATE_LOWER = lazy(_GATE_WORDS)


def _gate(text: str) -> bool:
    """_GATE.search(text), sooner."""
    return (_GATE_LOWER.search(text.lower()) if text.isascii() else _GATE.search(text)) is not None


def _cut(text: str) -> str:
    return text.strip()[:200]


def _lines(logs: Iterable[LogEvidence]) -> Iterable[tuple[str, int, str]]:
    """(source, line_no, text) of each log's head, then its tail (the tail may overlap the head)."""
    for log in logs:
        seen: set[int] = set()
        for ex in (log.head, log.tail):
            if ex is None:
                continue
            for i, text in enumerate(ex.lines):
                n = ex.start_line + i
                if n not in seen:
                    seen.add(n)
                    yield log.source, n, text


Line = tuple[str, int, str]


def _patterns() -> list[re.Pattern[str]]:
    """The patterns the prefilter reports lines for. Not the gate: it holds words of every training line (`size`,
    `grad`, `torch`), and reporting it cost a callback per word (2,000 on the benchmark log's head and tail); the gate
    is tested on the lines some fact pattern reports, the only lines a fact can come from."""
    return [*(rx for _, rx in _PRECISION), _HF_FP16_OFF, _HF_BF16_OFF, *(rx for _, rx in _FACTS), _CLIP, _LAUNCH]


@cache
def _prefilter() -> matcher.Matcher | None:
    """Every fact pattern in one Hyperscan database, in prefilter mode (it reports a superset of each
    pattern's lines, look-aheads included). Python's `re` tries each of these patterns at every position of
    every line: about 80 ms for a log's 800 head and tail lines, against well under 1 ms for one pass."""
    if matcher._hs is None:
        return None
    return matcher.Matcher([rx.pattern for rx in _patterns()], engine="hyperscan", prefilter=True)


def _searcher(lines: list[Line]) -> Callable[[re.Pattern[str]], list[Line]]:
    """`pick(rx)`: the lines (in order) that rx may match, of those the gate matches; each is still
    searched with rx itself. A line outside a pattern's prefilter report cannot match it, so the first
    match of every fact is the one a search of every line would find. Lines that are not pure ASCII
    are always searched with `re` (Python's \\w, \\d and (?i) are Unicode-aware, Hyperscan's are not)."""
    m = _prefilter()
    if m is None:
        every = [x for x in lines if _gate(x[2])]
        return lambda rx: every
    encoded = [t.encode() for _, _, t in lines]
    starts = [0, *accumulate(len(e) + 1 for e in encoded)][:-1]
    everywhere = {i for i, (_, _, t) in enumerate(lines) if not t.isascii() or "\n" in t}
    found: dict[int, set[int]] = {}
    for idx, end in m.find(b"\n".join(encoded)):
        found.setdefault(idx, set()).add(max(0, bisect_right(starts, max(0, end - 1)) - 1))
    index = {id(rx): i for i, rx in enumerate(_patterns())}
    gated = {i for i in everywhere.union(*found.values()) if _gate(lines[i][2])}

    def pick(rx: re.Pattern[str]) -> list[Line]:
        return [lines[i] for i in sorted((found.get(index[id(rx)], set()) | everywhere) & gated)]
    return pick


def _precision(pick: Callable[[re.Pattern[str]], list[Line]]) -> RunFact | None:
    for value, rx in _PRECISION:
        for src, n, text in pick(rx):
            if rx.search(text):
                return RunFact(name="precision", value=value, source=src, line_no=n, text=_cut(text))
    # HF TrainingArguments print both flags: both off is a full-precision run
    fp16_off = next(((s, n, t) for s, n, t in pick(_HF_FP16_OFF) if _HF_FP16_OFF.search(t)), None)
    if fp16_off and any(_HF_BF16_OFF.search(t) for _, _, t in pick(_HF_BF16_OFF)):
        return RunFact(name="precision", value="fp32", source=fp16_off[0], line_no=fp16_off[1], text=_cut(fp16_off[2]))
    return None


def _clipping(pick: Callable[[re.Pattern[str]], list[Line]]) -> RunFact | None:
    for src, n, text in pick(_CLIP):
        m = _CLIP.search(text)
        if m:
            raw = m.group(2)
            try:
                on = float(raw) > 0
            except ValueError:
                on = False  # None / null / False
            return RunFact(name="grad_clipping", value="on" if on else "off", source=src, line_no=n, text=_cut(text))
    return None


SAVE_RAISED_LINES = 5


def _save_raised(line_no: int, log: LogEvidence) -> bool:
    """A traceback raised from a save ('torch.save' -> serialization.py) starts just below the line announcing it:
    that checkpoint was never completed, and must not be offered as the one to resume from."""
    return any(0 < t.start_line - line_no <= SAVE_RAISED_LINES
               and any("save" in f.lower() or "serializ" in f.lower() for f in t.frames) for t in log.tracebacks)


def _saves(logs: Iterable[LogEvidence]) -> list[RunFact]:
    out: list[RunFact] = []
    for log in logs:
        for ln in log.saved_lines:
            if _NOT_A_SAVE.search(ln.text) or _save_raised(ln.line_no, log):
                continue
            path = _SAVED_PATH.search(ln.text)
            step = _SAVED_STEP.search(path.group(1) if path else ln.text) or _SAVED_STEP.search(ln.text)
            value = (path.group(1) if path else "") + (f" (step {step.group(1)})" if step else "")
            if value:
                out.append(RunFact(name="checkpoint_saved", value=value.strip(), source=ln.source, line_no=ln.line_no, text=_cut(ln.text)))
    # the scan keeps the newest saves, and before them the last one before a NaN when that is older: keep it too
    return out if len(out) <= KEPT["checkpoint_saved"] else out[:1] + out[-(KEPT["checkpoint_saved"] - 1):]


def run_facts(logs: list[LogEvidence], launch_command: str | None = None) -> list[RunFact]:
    """Every fact the logs state about the run, each with the line it was read from."""
    pick = _searcher(list(_lines(logs)))
    facts: list[RunFact] = []
    for f in (_precision(pick), _clipping(pick)):
        if f is not None:
            facts.append(f)
    for name, rx in _FACTS:
        found = 0
        for src, n, text in pick(rx):
            m = rx.search(text)
            if not m:
                continue
            key = m.groupdict().get("key")
            value = next((g for g in m.groups() if g and g != key), m.group(0))
            value = f"{key}={value}" if key else value if name in ("dataset_size", "batch_size") else value.replace(",", "")
            facts.append(RunFact(name=name, value=value, source=src, line_no=n, text=_cut(text)))
            found += 1
            if found >= KEPT.get(name, 1):
                break
    facts += _saves(logs)
    if launch_command:
        facts.append(RunFact(name="launch_command", value=launch_command))
    else:
        cmd = next(((s, n, t) for s, n, t in pick(_LAUNCH) if _LAUNCH.match(t)), None)
        if cmd is not None:
            facts.append(RunFact(name="launch_command", value=_LAUNCH.match(cmd[2]).group(1).strip(), source=cmd[0],  # type: ignore[union-attr]
                                 line_no=cmd[1], text=_cut(cmd[2])))
    return facts


def fact(facts: list[RunFact], name: str) -> RunFact | None:
    """The first fact of that name, or None when the run did not say."""
    return next((f for f in facts if f.name == name), None)


def version_below(version: str, minimum: str) -> bool:
    """True when a dotted version (2.0.1+cu118) is older than `minimum` (2.1)."""
    def parts(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])
    return parts(version) < parts(minimum)


def contributing_facts(primary: FailureClass | None, facts: list[RunFact]) -> list[str]:
    """The facts that made this class of failure more likely, each cited: what an engineer lists first."""
    def cite(f: RunFact, what: str) -> str:
        where = f"{f.source.rsplit('/', 1)[-1]}:{f.line_no}" if f.source and f.line_no else "the launch command"
        return f"{what} ({where}: {f.text[:120]})" if f.text else f"{what} ({where})"

    out: list[str] = []
    prec, clip, warm = fact(facts, "precision"), fact(facts, "grad_clipping"), fact(facts, "warmup")
    if primary in (FailureClass.NAN_INF, FailureClass.OPTIMIZATION_DIVERGENCE):
        if prec is not None and prec.value == "fp16":
            out.append(cite(prec, "fp16 mixed precision: overflow-prone without loss scaling"))
        if clip is not None and clip.value == "off":
            out.append(cite(clip, "no gradient clipping"))
        if warm is not None and float(re.findall(_NUM, warm.value)[-1]) == 0:
            out.append(cite(warm, "no learning-rate warmup"))
    if primary is FailureClass.OOM:
        for name, what in (("batch_size", "batch size"), ("precision", "precision"), ("world_size", "world size")):
            f = fact(facts, name)
            if f is not None and not (name == "precision" and f.value != "fp32"):
                out.append(cite(f, f"{what} {f.value}" if name != "precision" else "full fp32 precision"))
    if primary in (FailureClass.DATA_PIPELINE, FailureClass.EVALUATION_MISMATCH):
        out += [cite(f, f"dataset size: {f.value}") for f in facts if f.name == "dataset_size"]
    return out
