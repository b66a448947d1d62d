"""Regenerate the files that come from the code: the failure taxonomy and the JSON schema.

    python -m ml_skills.gen            # write them
    python -m ml_skills.gen --check    # exit 1 if a committed copy differs (run by the tests)
"""

from __future__ import annotations

import argparse
import json
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


def outputs() -> dict[str, str]:
    tax = taxonomy_markdown()
    return {
        "references/failure-taxonomy.md": tax,
        "skills/check-failed-run/references/failure-taxonomy.md": tax,
        "schemas/check-failed-run.schema.json": schema_json(),
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
