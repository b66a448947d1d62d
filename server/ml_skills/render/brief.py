"""The diagnosis sized for an assistant's context: what it acts on, and only the bulky parts it asks for.

Inside a coding assistant every byte a tool returns is paid for in context. The brief carries
every fact of the text report (render/text.py, same words: a test checks it) as typed fields,
says what it left out with counts, and adds the parts named in `detail` (trajectory points,
every anomaly, the whole ruled-out list, artifact inventories, ...), within a size cap.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field

from ml_skills.models import Decision, Diagnosis, FailureClass, Level, Model, Risk, RunStatus
from ml_skills.render import text
from ml_skills.safety.quoting import fence, fence_open, one_line
from ml_skills.targets import TargetKind

QUOTED = "[quoted in decisive_lines]"
"""Stands for a log line where the report repeats one of decisive_lines (evidence, proximate cause): each is quoted once."""

DETAIL_MAX_CHARS = 60_000
"""Cap on the parts asked for in one answer (JSON characters); the rest is named, never silently dropped."""


class Part(StrEnum):
    """Parts of check-failed-run.json left out of the brief unless asked for."""

    EVIDENCE = "evidence"  # every evidence item, with its kind and full source path
    EXCERPT = "excerpt"  # the whole decisive excerpt (about 40 lines), fenced
    RULED_OUT = "ruled_out"  # every ruled-out class
    FIXES = "fixes"  # each fix's id and the policy rule that set its risk
    FINDINGS = "findings"
    TRAJECTORY = "trajectory"  # metric series with their downsampled points
    ANOMALIES = "anomalies"
    ARTIFACTS = "artifacts"  # the run directory's inventory
    FACTS = "facts"  # each run fact with the line it was read from
    LAST_PROGRESS = "last_progress"
    SOURCES = "sources"


class FixBrief(Model):
    """One ranked fix (the list is in rank order)."""

    action: str
    risk: Risk
    impact: Level = Field(description="Expected impact.")
    time: str = Field(description="Time to try it.")
    validation: str = Field(description="How to tell, over the next 50-200 steps, that it worked.")
    command: str | None = Field(None, description="The exact command, where it can be derived.")
    because: str = Field("", description="The evidence line or run fact that made this fix apply; empty when it is the same "
                                         "as the fix before's.")


class RootCauseBrief(Model):
    proximate: str = Field(description="Where execution failed, with the log line.")
    root: str
    contributing: list[str] = Field(default_factory=list)


class Brief(Model):
    """Every fact of the text report, as fields; the rest of check-failed-run.json on request."""

    report_path: str = Field(description="Where check-failed-run.json was written: the whole diagnosis.")
    target: str = Field(description="What was diagnosed.")
    target_kind: TargetKind = Field(description="What kind of target it was (the registry of target kinds, targets.py).")
    run_status: RunStatus = Field(description="What state the run is in.")
    framework: str = Field(description="The framework and how it was known (detected, given), or unknown.")
    primary_cause: FailureClass | None = Field(description="The primary failure class; null when the evidence cannot decide "
                                                           "(or the run completed with no failure).")
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in the primary class.")
    confidence_level: Level = Field(description="The same as a word: high >= 0.75, medium >= 0.50, low below.")
    contributing_factors: list[FailureClass] = Field(default_factory=list, description="Other classes that made the failure likely or worse.")
    run_facts: str = Field("", description="What the run printed about itself (precision, lr, clipping, batch sizes, versions, "
                                           "saves), in one line; detail 'facts' for each fact with its line.")
    evidence: list[str] = Field(default_factory=list, description=f"'file:line: text', at most {text.MAX_EVIDENCE} (detail "
                                                                  "'evidence' for all).")
    logs: dict[str, str] = Field(default_factory=dict, description="Full path of each file named in `evidence`, when it is "
                                                                   "not the target itself.")
    decisive_lines: str = Field("", description="The lines around the decisive one (marked '>'), fenced as quoted data.")
    ruled_out: list[str] = Field(default_factory=list, description=(
        f"'class: why', at most {text.MAX_RULED_OUT} classes (detail 'ruled_out' for all); classes with the same reason share "
        "a line, and where the reasons differ by one number it is given after each class and N stands for it."))
    root_cause: RootCauseBrief = Field(description="Proximate cause (where execution failed), root cause, contributing causes.")
    insufficient_evidence: str | None = Field(None, description="When the evidence cannot decide: the smallest artifact that would.")
    fixes: list[FixBrief] = Field(default_factory=list, description="Ranked recovery actions.")
    decision: Decision = Field(description="GO when a safe recovery path exists, NO-GO when a person must decide.")
    decision_reason: str = Field(description="Why.")
    next_commands: list[str] = Field(default_factory=list, description="Exact commands to run next.")
    report_lines: list[str] = Field(default_factory=list, description="Source-specific report lines.")
    plot: str | None = Field(None, description="Path of the metric plot, when one was made.")
    left_out: list[str] = Field(default_factory=list, description="Parts of the report not in this answer, with counts: "
                                                                  "name them in `detail` (or read_report's `fields`) to get them.")
    detail: dict[str, Any] = Field(default_factory=dict, description="The parts asked for in `detail`.")


def primary_cause_text(b: Brief) -> str:
    if b.primary_cause is None and b.run_status is RunStatus.COMPLETED and b.decision is Decision.GO:
        if b.contributing_factors:  # an earlier attempt failed and the run outlived it (engine/classify/status.py: outlived)
            return "none: the run completed after an earlier attempt failed (see contributing factors)"
        return "none: the run completed and no failure was found"
    if b.primary_cause is None:
        return "undetermined (confidence: 0.00)"
    return f"{b.primary_cause.value} (confidence: {b.confidence:.2f})"


def render(b: Brief) -> str:
    """The brief in the report's shape: the text content for clients that hand their model the text."""
    out = [f"Target: {b.target} ({b.target_kind})", *b.report_lines, f"Status: {b.run_status.value}", f"Framework: {b.framework}",
           f"Primary cause: {primary_cause_text(b)}",
           "Contributing factors: " + (", ".join(c.value for c in b.contributing_factors) or "none")]
    out += [f"Run facts: {b.run_facts}"] if b.run_facts else []
    out += ["Evidence:"]
    out += [f"- {e}" for e in b.evidence]
    out += [f"Files: {', '.join(f'{n} = {p}' for n, p in b.logs.items())}"] if b.logs else []
    out += ["Decisive lines:", b.decisive_lines] if b.decisive_lines else []
    out += ["Ruled out:", *(f"- {r}" for r in b.ruled_out)] if b.ruled_out else []
    rc = b.root_cause
    out += ["Root cause:", f"Proximate: {rc.proximate}", f"Root: {rc.root}", *(f"Contributing: {c}" for c in rc.contributing)]
    out += [f"Insufficient evidence: {b.insufficient_evidence}"] if b.insufficient_evidence else []
    out += ["Top fixes:"]
    because = ""
    for i, f in enumerate(b.fixes, 1):
        because = f.because or because  # the brief leaves out a reason the fix before already gave
        out.append(f"{i}) {f.action} | risk={f.risk.value} | expected impact={f.impact.value} | time to try={f.time} | "
                   f"validate={f.validation}" + (f" | because: {because}" if because else "") + (f" | command: {f.command}" if f.command else ""))
    out += [f"Decision: {b.decision.value} ({b.decision_reason})", f"Confidence: {b.confidence_level.value}", "", "Next command(s):"]
    out += [f"- {c}" for c in b.next_commands]
    out += [f"Plot: {b.plot}"] if b.plot else []
    out += [f"Report: {b.report_path}"]
    out += ["Left out (name in detail, or read_report fields): " + "; ".join(b.left_out)] if b.left_out else []
    return "\n".join(x if x is b.decisive_lines else one_line(x) for x in out) + "\n"  # the fenced block is the one multi-line entry


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _quote_once(d: Diagnosis, names: dict[str, str]) -> tuple[list[str], str, str]:
    """Evidence lines, proximate and root cause, with a line already in decisive_lines replaced by a pointer to it."""
    ex = d.decisive_excerpt
    shown = {n: t.strip() for n, t in text.decisive_window(d)}

    def once(said: str, source: str | None, line_no: int | None, quoted: str) -> str:
        line = shown.get(line_no or -1, "") if ex is not None and source == ex.source else ""
        if line and quoted.endswith(line) and said.endswith(line):
            return said[: len(said) - len(line)].rstrip() + " " + QUOTED
        return said

    evidence = [once(text.evidence_line(e, names.get(e.source or "")), e.source, e.line_no, e.text) for e in d.evidence[: text.MAX_EVIDENCE]]
    rc = d.root_cause
    proximate = once(rc.proximate, rc.proximate_line.source, rc.proximate_line.line_no, rc.proximate_line.text) if rc.proximate_line else rc.proximate
    root = rc.root  # a root cause that ends by quoting a line of the window ("the line reads: ...") points to it
    for line in shown.values():
        if len(line) >= 20 and root.endswith(line):
            root = root[: len(root) - len(line)].rstrip() + " " + QUOTED
            break
    return evidence, proximate, root


def _ruled_out(d: Diagnosis) -> list[str]:
    """The report's ruled-out lines, one line per reason: classes whose reasons are the same, or the same
    but for one number, share it ('oom (8), stalled (5): ... none of its N signatures ...')."""
    groups: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
    for r in d.ruled_out[: text.MAX_RULED_OUT]:
        parts = re.split(r"(\d+)", r.reason)
        groups.setdefault(tuple(parts[0::2]), []).append((r.failure_class.value, parts[1::2]))
    out = []
    for words, members in groups.items():
        numbers = list(zip(*(n for _, n in members), strict=True))
        differ = [i for i, column in enumerate(numbers) if len(set(column)) > 1]
        if len(differ) > 1:  # more than one number differs: a line each
            out += [f"{c}: {_join(words, n)}" for c, n in members]
        elif differ:
            i = differ[0]
            shape = _join(words, [("N" if j == i else v) for j, v in enumerate(members[0][1])])
            out.append(", ".join(f"{c} ({n[i]})" for c, n in members) + f": {shape}")
        else:
            out.append(", ".join(c for c, _ in members) + f": {_join(words, members[0][1])}")
    return out


def _join(words: tuple[str, ...], numbers: list[str]) -> str:
    return "".join(w + (numbers[i] if i < len(numbers) else "") for i, w in enumerate(words))


def left_out(d: Diagnosis) -> list[str]:
    """One line per part the brief does not carry, with what it holds."""
    out: list[str] = []
    if len(d.evidence) > text.MAX_EVIDENCE:
        out.append(f"evidence: {len(d.evidence) - text.MAX_EVIDENCE} more ({len(d.evidence)} in all)")
    ex = d.decisive_excerpt
    if ex is not None:
        shown = text.decisive_window(d)
        if len(ex.lines) > len(shown):
            out.append(f"excerpt: {len(ex.lines)} lines ({len(shown)} shown)")
    if len(d.ruled_out) > text.MAX_RULED_OUT:
        more = d.ruled_out[text.MAX_RULED_OUT:]
        out.append(f"ruled_out: {len(more)} more ({', '.join(r.failure_class.value for r in more)})")
    if d.trajectory:
        points = sum(len(s.points) for s in d.trajectory)
        names = ", ".join(dict.fromkeys(s.name if s.split == "train" else f"{s.split}/{s.name}" for s in d.trajectory))
        out.append(f"trajectory: {len(d.trajectory)} series ({names}), {points} points")
    if d.anomalies:
        kinds = ", ".join(dict.fromkeys(a.kind.value for a in d.anomalies))
        out.append(f"anomalies: {len(d.anomalies)} ({kinds})")
    if d.artifacts is not None:
        a = d.artifacts
        out.append(f"artifacts: {a.total_files} files, {len(a.configs)} configs, {len(a.logs)} logs, "
                   f"{len(a.checkpoints)} checkpoints" + (f", newest valid {Path(a.newest_valid_checkpoint).name}"
                                                          if a.newest_valid_checkpoint else ""))
    if d.last_progress is not None and not any(e.kind == "progress" for e in d.evidence[: text.MAX_EVIDENCE]):  # else it is evidence
        p = d.last_progress
        at = f"step {p.step:g}" if p.step is not None else f"line {p.line_no}"
        out.append(f"last_progress: {at}")
    if len(d.sources) > 1:
        out.append(f"sources: {len(d.sources)}")
    if d.facts:
        out.append(f"facts: {len(d.facts)} ({', '.join(dict.fromkeys(f.name for f in d.facts))}), each with its line")
    return out


def part(d: Diagnosis, name: Part, marker: str) -> Any:
    """One part as JSON values (the excerpt fenced as quoted data)."""
    if name is Part.EXCERPT:
        ex = d.decisive_excerpt
        if ex is None:
            return None
        return fence(ex.lines, marker=marker, label=f"{Path(ex.source).name} from line {ex.start_line}").text
    return d.model_dump(mode="json")[{Part.EVIDENCE: "evidence", Part.RULED_OUT: "ruled_out", Part.FIXES: "fixes",
                                      Part.FINDINGS: "findings", Part.TRAJECTORY: "trajectory", Part.ANOMALIES: "anomalies",
                                      Part.ARTIFACTS: "artifacts", Part.LAST_PROGRESS: "last_progress",
                                      Part.SOURCES: "sources", Part.FACTS: "facts"}[name]]


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def cap(name: str, value: Any, budget: int) -> tuple[Any, str | None]:
    """The value if it fits in `budget` JSON characters; a list cut to the items that fit; else nothing. Says what it cut."""
    n = size(value)
    if n <= budget:
        return value, None
    if isinstance(value, list):
        kept: list[Any] = []
        used = 2
        for item in value:
            used += size(item) + 1
            if used > budget:
                break
            kept.append(item)
        return kept, (f"{name}: {len(kept)} of {len(value)} items kept by the {DETAIL_MAX_CHARS}-character cap; "
                      f"ask for the rest by index ({name}.{len(kept)}, ...) with read_report")
    return None, f"{name}: {n} characters, over the {DETAIL_MAX_CHARS}-character cap; ask for its fields one by one with read_report"


def build(d: Diagnosis, report_path: str, marker: str, detail: list[Part] | None = None) -> tuple[Brief, list[str]]:
    """The brief of a diagnosis, and notes on any part the cap cut."""
    names = text.shown_names(d)
    window = text.decisive_lines(d, width=None)
    ex = d.decisive_excerpt
    decisive = ""
    if window and ex is not None:
        label = Path(ex.source).name
        decisive = fence_open(marker, label) + "\n" + "\n".join(window) + f"\n[/data {marker}]"
    rc = d.root_cause
    evidence, proximate, root = _quote_once(d, names)
    fixes = [FixBrief(action=f.action, risk=f.risk, impact=f.expected_impact, time=f.time_to_try,
                      validation=f.validation, command=f.command,
                      because="" if i and f.because == d.fixes[i - 1].because else f.because) for i, f in enumerate(d.fixes)]
    extra: dict[str, Any] = {}
    notes: list[str] = []
    budget = DETAIL_MAX_CHARS
    for p in dict.fromkeys(detail or []):
        value, note = cap(p.value, part(d, p, marker), budget)
        if note:
            notes.append(note)
        if value is not None:
            extra[p.value] = value
            budget -= size(value)
    b = Brief(
        report_path=report_path, target=d.target, target_kind=d.target_kind, run_status=d.run_status, framework=text.framework(d),
        primary_cause=d.primary_cause, confidence=d.primary_cause_confidence, confidence_level=d.confidence,
        contributing_factors=d.contributing_factors, run_facts=text.facts_line(d) if d.facts else "",
        evidence=evidence,
        logs={n: s for s, n in names.items() if s != d.target and n != s},
        decisive_lines=decisive, ruled_out=_ruled_out(d),
        root_cause=RootCauseBrief(proximate=proximate, root=root, contributing=rc.contributing),
        insufficient_evidence=d.insufficient_evidence, fixes=fixes, decision=d.decision, decision_reason=d.decision_reason,
        next_commands=d.next_commands or [text.NO_NEXT_COMMAND], report_lines=d.report_lines, plot=d.plot,
        left_out=[x for x in left_out(d) if x.split(":", 1)[0] not in extra], detail=extra,
    )
    return b, notes
