"""Regenerate the files that come from the code: the failure taxonomy, the JSON schema, and the MCP tool reference.

    python -m ml_skills.gen            # write them
    python -m ml_skills.gen --check    # exit 1 if a committed copy differs (run by the tests)

The running server never imports this module: what its resources serve (the taxonomy, the schema,
the skill's text) is written here into the package (`server/ml_skills/shipped/`), so a wheel
carries it. The tool reference is read from the server the way a client would, in a child process
(`python -m ml_skills.mcp_tools.reference`): the generator imports no face.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from ml_skills.catalog.loader import exception_rules, fixes, signatures
from ml_skills.models import Diagnosis, FailureClass
from ml_skills.policy.risk import risk_of

CLASS_SUMMARY = {
    FailureClass.NAN_INF: "Loss, gradients or activations became NaN or Inf.",
    FailureClass.OOM: "Device (GPU) or host memory ran out, including kills by the OOM killer (exit 137).",
    FailureClass.OPTIMIZATION_DIVERGENCE: "Loss blows up or training collapses without (yet) becoming NaN.",
    FailureClass.CUDA_RUNTIME: "The GPU runtime, driver, a kernel or the hardware failed.",
    FailureClass.NCCL_DISTRIBUTED: "Collective communication or process-group failures between ranks.",
    FailureClass.DATA_PIPELINE: "Reading, decoding or batching the data, or labels out of range.",
    FailureClass.CONFIG_ERROR: "The launch command, configuration or environment is wrong.",
    FailureClass.IO_CHECKPOINT: "Saving, loading or resuming checkpoints, and the storage under them.",
    FailureClass.STALLED: "The run stopped making progress without dying.",
    FailureClass.PROCESS_CRASH: "The process died from a signal or a native crash, not a Python exception.",
    FailureClass.EVALUATION_MISMATCH: "Training runs, but evaluation is broken, misleading or disagrees with training.",
    FailureClass.PIPELINE_ORCHESTRATION: "The pipeline or job orchestrator failed around the training code.",
    FailureClass.CLOUD_PERMISSIONS_QUOTA: "The cloud refused: identity, permissions, quota or capacity.",
}


def taxonomy_markdown() -> str:
    lines = [
        "# Failure taxonomy",
        "",
        "Generated from the signature catalog (`server/ml_skills/catalog/`) by `python -m ml_skills.gen`;",
        "do not edit by hand. Roles: *cause* is a self-describing error, *symptom* is how another failure",
        "looks from outside (defers to any cause), *hint* only tilts the balance.",
        "",
    ]
    sigs = signatures()
    fx = fixes()
    for cls in FailureClass:
        mine = [s for s in sigs if s.failure_class is cls]
        lines += [f"## {cls.value}", "", CLASS_SUMMARY[cls], "", "| signature | role | severity | frameworks | meaning | how to confirm |", "|---|---|---|---|---|---|"]
        for s in mine:
            fws = ", ".join(s.frameworks) or "any"
            lines.append(f"| `{s.id}` | {s.role.value} | {s.severity.value} | {fws} | {_cell(s.meaning)} | {_cell(s.confirm)} |")
        rules = [r for r in exception_rules() if r.failure_class is cls]
        if rules:
            lines += ["", "Tracebacks classed here when no signature names the line:", ""]
            lines += [f"- `{r.id}`: {r.meaning}" for r in rules]
        usual = [f for f in fx.values() if cls in f.classes and f.id != "collect-more-evidence"]
        lines += ["", "Usual fixes:", ""]
        for f in usual:
            risk, _ = risk_of(f.kind)
            lines.append(f"- `{f.id}` ({risk.value}, impact {f.impact.value}): {f.action}. Validate: {f.validation}.")
        lines.append("")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def schema_json() -> str:
    schema = Diagnosis.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://ml-skills.dev/schemas/check-failed-run.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def triage_schema_json() -> str:
    """triage-runs.json (grid/models.py), checked by the grid tests against real reports."""
    from ml_skills.grid.models import TriageReport

    schema = TriageReport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://ml-skills.dev/schemas/triage-runs.schema.json"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schemas_markdown() -> str:
    """Every field of check-failed-run.json with its type and description, from the models."""
    schema = Diagnosis.model_json_schema()
    defs = schema.get("$defs", {})
    lines = [
        "# check-failed-run.json",
        "",
        "Generated from the pydantic models (`server/ml_skills/models.py`) by `python -m ml_skills.gen`.",
        "The machine-checkable form is `schemas/check-failed-run.schema.json` (JSON Schema 2020-12).",
        "",
    ]

    def typ(p: dict) -> str:
        if "$ref" in p:
            return p["$ref"].rsplit("/", 1)[-1]
        if "anyOf" in p:
            return " or ".join(typ(x) for x in p["anyOf"])
        if p.get("type") == "array":
            return f"list of {typ(p.get('items', {}))}" if "items" in p else "list"
        if "enum" in p:
            return "one of " + ", ".join(f"`{v}`" for v in p["enum"])
        return str(p.get("type", "any"))

    def table(title: str, sch: dict) -> None:
        lines.extend([f"## {title}", "", sch.get("description", "").strip(), "", "| field | type | meaning |", "|---|---|---|"])
        req = set(sch.get("required", []))
        for name, p in sch.get("properties", {}).items():
            desc = (p.get("description") or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{name}`{'' if name in req else ' (optional)'} | {typ(p)} | {desc} |")
        lines.append("")

    table("Diagnosis (the whole file)", schema)
    for name in sorted(defs):
        if "properties" in defs[name]:
            table(name, defs[name])
    return "\n".join(lines)


def vocabulary_markdown() -> str:
    """The closed word sets of the report, from the enums."""
    from ml_skills.models import ActionKind, Decision, FindingSeverity, Framework, Level, Risk, Role, RunStatus, Severity, Task
    from ml_skills.policy.risk import DEFAULT_RISK

    lines = ["# Vocabulary", "", "Generated from the enums in `server/ml_skills/models.py` by `python -m ml_skills.gen`.", ""]
    lines += ["## Failure classes", ""] + [f"- `{c.value}`: {CLASS_SUMMARY[c]}" for c in FailureClass] + [""]
    status_words = {
        "crashed": "the process ended with an error (an exception or a signal; also a NaN guard that raised)", "hung": "alive or silent, but no progress",
        "degraded": "still training, but unhealthy (throughput collapse, memorisation)",
        "diverged": "loss became NaN/Inf or blew up and no exception ended the run", "recovered": "an error happened and training went on",
        "completed": "finished (possibly with bad quality)", "running": "alive and progressing",
        "unknown": "the evidence does not say",
    }
    lines += ["## Run status", ""] + [f"- `{s.value}`: {status_words[s.value]}" for s in RunStatus] + [""]
    lines += ["## Risk", "", "- `safe`: may run without asking", "- `needs-approval`: runs only after the person accepts",
              "- `dangerous`: refused unless the policy file allows it, then still needs acceptance", ""]
    assert {r.value for r in Risk} == {"safe", "needs-approval", "dangerous"}
    lines += ["## Action kinds and their default risk", ""] + [f"- `{k.value}`: {DEFAULT_RISK[k][0].value} ({DEFAULT_RISK[k][1]})" for k in ActionKind] + [""]
    lines += ["## Decision", "", f"- `{Decision.GO.value}`: a safe recovery path exists", f"- `{Decision.NO_GO.value}`: a person must decide", ""]
    lines += ["## Signature roles", ""] + [f"- `{r.value}`" for r in Role] + [""]
    lines += ["## Signature severity", ""] + [f"- `{s.value}`" for s in Severity] + [""]
    lines += ["## Finding severity", "", "One finding per top fix: `blocker` for the critical one, `high` for significant ones.", ""] + [f"- `{s.value}`" for s in FindingSeverity] + [""]
    lines += ["## Confidence levels", "", "high >= 0.75, medium >= 0.50, low below.", ""] + [f"- `{s.value}`" for s in Level] + [""]
    lines += ["## Frameworks", ""] + [f"- `{f.value}`" for f in Framework] + [""]
    lines += ["## Tasks", ""] + [f"- `{t.value}`" for t in Task] + [""]
    return "\n".join(lines)


CHECKOUT = Path(__file__).resolve().parents[2]
"""The repository this module runs from: the hand-written files shipped in the package are read there."""
SHIPPED = "server/ml_skills/shipped"
"""Package data the MCP resources serve (mcp_tools/resources.py); in a wheel it is inside ml_skills."""


def _child(cmd: list[str], what: str) -> str:
    """What `python -m MODULE` prints, run in a child process on this same code (the generator imports no face)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8",
           "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run(cmd, env=env, capture_output=True, timeout=300, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{what} could not be built: " + out.stderr.decode("utf-8", "replace")[-2000:])
    return out.stdout.decode("utf-8")


def tool_reference() -> str:
    """docs/tools.md, from `python -m ml_skills.mcp_tools.reference`."""
    return _child([sys.executable, "-m", "ml_skills.mcp_tools.reference"], "the tool reference")


def tool_listing() -> str:
    """server/ml_skills/mcp_tools/tools.json, what the server's tools/list serves (mcp_tools/listing.py)."""
    return _child([sys.executable, "-m", "ml_skills.mcp_tools.listing"], "the tool listing")


def outputs() -> dict[str, str]:
    tax = taxonomy_markdown()
    schema = schema_json()
    skill = CHECKOUT / "skills" / "check-failed-run"
    return {
        "docs/tools.md": tool_reference(),
        "server/ml_skills/mcp_tools/tools.json": tool_listing(),
        "references/schemas.md": schemas_markdown(),
        "references/vocabulary.md": vocabulary_markdown(),
        "references/failure-taxonomy.md": tax,
        "skills/check-failed-run/references/failure-taxonomy.md": tax,
        "schemas/check-failed-run.schema.json": schema,
        "schemas/triage-runs.schema.json": triage_schema_json(),
        f"{SHIPPED}/failure-taxonomy.md": tax,
        f"{SHIPPED}/check-failed-run.schema.json": schema,
        f"{SHIPPED}/SKILL.md": (skill / "SKILL.md").read_text("utf-8"),
        f"{SHIPPED}/root-cause-patterns.md": (skill / "references" / "root-cause-patterns.md").read_text("utf-8"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ml_skills.gen")
    ap.add_argument("--check", action="store_true", help="fail if a generated file differs from the code")
    ap.add_argument("--root", default=".", help="repository root")
    args = ap.parse_args(argv)
    root = Path(args.root)
    stale = []
    for rel, text in outputs().items():
        path = root / rel
        if args.check:
            if not path.exists() or path.read_text("utf-8") != text:
                stale.append(rel)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, "utf-8")
    if stale:
        print("stale generated files (run: python -m ml_skills.gen): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
