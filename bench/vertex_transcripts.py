"""Regenerate the `## Real outputs` transcripts in docs/vertex.md.

    PYTHONPATH=server python bench/vertex_transcripts.py

Each transcript is the real CLI (and the real google-cloud-aiplatform / google-cloud-logging
clients) against a fresh loopback fake of the two REST APIs (tests/fakes/vertex_api.py, as in
tests/collectors/test_vertex.py), one fake per transcript so that queued faults and the order
in which a polled pipeline's states are served start over each time.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.doc_blocks import ROOT, replace_indented, run_cli, shown
from tests.fakes.vertex_api import PROJECT, REGION, Fault, VertexFake, load

DOC = ROOT / "docs" / "vertex.md"
OUT = Path(tempfile.gettempdir()) / "vertex-report"


def _error(status: int, kind: str, message: str) -> Fault:
    return Fault(status, {"Retry-After": "3600"} if status == 429 else {},
                 json.dumps({"error": {"code": status, "message": message, "status": kind}}).encode())


# heading -> (scenario, route and fault queued first, how it is polled)
CASES: dict[str, tuple[str, tuple[str, Fault] | None, list[str]]] = {
    "### A quota failure while provisioning": ("quota", None, ["--once"]),
    "### PERMISSION_DENIED on a bucket": ("permission", None, ["--once"]),
    "### FAILED_PRECONDITION on a missing artifact": ("precondition", None, ["--once"]),
    "### One upstream failure, five tasks not triggered": ("upstream", None, ["--once"]),
    "### A running pipeline that later fails (`--interval 1`)": ("running-then-fails", None, ["--interval", "1"]),
    "### A succeeded pipeline": ("succeeded", None, ["--once"]),
    "### A custom training job by id": ("custom-job", None, ["--once"]),
    "### Fault: Cloud Logging refuses (403)": ("quota", ("logs", _error(
        403, "PERMISSION_DENIED", "Permission 'logging.logEntries.list' denied on resource (or it may not exist).")), ["--once"]),
    "### Fault: Vertex AI rate-limits with a Retry-After past the deadline": ("upstream", ("pipeline", _error(
        429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Resource management (CRUD) requests' and limit "
        "'Resource management (CRUD) requests per minute per region'")), ["--once"]),
}


def transcript(kind: str, fault: tuple[str, Fault] | None, poll: list[str]) -> str:
    with VertexFake() as fake:
        job = load(fake, kind)
        if fault is not None:
            fake.fail(*fault)
        args = ["check-failed-run", "--vertex-pipeline", job, "--project", PROJECT, "--region", REGION, *poll, "--out-dir", str(OUT)]
        proc = run_cli(args, env={"ML_SKILLS_VERTEX_ENDPOINT": fake.endpoint, "ML_SKILLS_LOGGING_ENDPOINT": fake.endpoint})
    if proc.returncode != 0:
        raise SystemExit(f"{kind}: the CLI failed ({proc.returncode}): {proc.stderr}")
    return shown("ml-skills " + " ".join(args), proc)


def render(text: str) -> str:
    """The doc with every output replaced by what the CLI prints now (tests/test_docs.py compares)."""
    for heading, case in CASES.items():
        text = replace_indented(text, heading, transcript(*case))
    return text


def main() -> None:
    DOC.write_text(render(DOC.read_text()))
    print(f"vertex: {len(CASES)} outputs")


if __name__ == "__main__":
    main()
