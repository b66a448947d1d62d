"""The compact report a person reads in a terminal (format fixed by the check-failed-run skill)."""

from __future__ import annotations

from pathlib import Path

from ml_skills.models import Diagnosis
from ml_skills.safety.redact import redact


def render(d: Diagnosis, json_path: str | None = None) -> str:
    out: list[str] = []
    add = out.append
    add(f"Target: {d.target} ({d.target_kind})")
    for line in d.report_lines:
        add(line)
    add(f"Status: {d.run_status.value}")
    fw = d.framework.value if d.framework_source != "unknown" else "unknown"
    add(f"Framework: {fw}" + (f" ({d.framework_source})" if d.framework_source != "unknown" else ""))
    if d.primary_cause is None and d.run_status.value == "completed" and d.decision.value == "GO":
        add("Primary cause: none: the run completed and no failure was found")
    elif d.primary_cause is None:
        add("Primary cause: undetermined (confidence: 0.00)")
    else:
        add(f"Primary cause: {d.primary_cause.value} (confidence: {d.primary_cause_confidence:.2f})")
    add("Contributing factors: " + (", ".join(c.value for c in d.contributing_factors) or "none"))
    add("Evidence:")
    for e in d.evidence[:10]:
        where = f"{Path(e.source).name}:{e.line_no}: " if e.source and e.line_no else ""
        add(f"- {where}{e.text}")
    if d.decisive_excerpt is not None and d.root_cause.proximate_line is not None:
        ex = d.decisive_excerpt
        target = d.root_cause.proximate_line.line_no
        add(f"Decisive lines ({Path(ex.source).name}):")
        lo = max(0, target - ex.start_line - 5)
        for i, line in enumerate(ex.lines[lo : target - ex.start_line + 4], start=ex.start_line + lo):
            mark = ">" if i == target else " "
            add(f"  {mark}{i:>7} | {line[:200]}")
    if d.ruled_out:
        add("Ruled out:")
        for r in d.ruled_out[:6]:
            add(f"- {r.failure_class.value}: {r.reason}")
    add("Root cause:")
    add(f"Proximate: {d.root_cause.proximate}")
    add(f"Root: {d.root_cause.root}")
    for c in d.root_cause.contributing:
        add(f"Contributing: {c}")
    if d.insufficient_evidence:
        add(f"Insufficient evidence: {d.insufficient_evidence}")
    add("Top fixes:")
    for f in d.fixes:
        add(f"{f.rank}) {f.action} | risk={f.risk.value} | expected impact={f.expected_impact.value} | "
            f"time to try={f.time_to_try} | validate={f.validation}")
    add(f"Decision: {d.decision.value} ({d.decision_reason})")
    add(f"Confidence: {d.confidence.value}")
    add("")
    add("Next command(s):")
    for c in d.next_commands or ["ml-skills check-failed-run <run directory> --artifacts <dir>   # add the run's other logs and configs"]:
        add(f"- {c}")
    if d.plot:
        add(f"Plot: {d.plot}")
    if json_path:
        add(f"Report: {json_path}")
    if d.redactions:
        add(f"({d.redactions} secret(s) redacted)")
    return redact("\n".join(out)) + "\n"  # the last step: file names and quoted lines stripped of escapes, then redacted
