"""Re-score each History batch with the engine it was first scored with: the prospective verdicts.

    python bench/prospective.py [--out bench/prospective.json] [--healthy-out bench/prospective_healthy.json]

bench/accuracy.py's History rows name the commit that scored each batch of corpus cases before any change
they prompted. This script extracts that commit's server/ package (git archive, into a temporary
directory; the repository's worktrees and branches are not touched), runs its engine on those cases in a
child process, and records each verdict: the class named, and the kind of evidence it rested on (see
ml_skills.engine.classify.confidence). Those verdicts were made before the engine saw the logs, so they measure how
often a verdict of each kind is right on logs nobody tuned for; bench/accuracy.py fits the confidence of
each kind on the dev half of them and checks it on the held-out half. The healthy set's History rows are re-run the same
way (each case by the first row that scored it): a class named there is a false alarm, a wrong verdict of its kind.

Stdlib and git only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = [tuple(r.values()) for r in json.loads((ROOT / "bench" / "history.json").read_text())["corpus"]["rows"]]

_HASH = re.compile(r"\b[0-9a-f]{7}\b")
_PART = re.compile(r"([0-9a-f]{7}) \((\d+)-(\d+)\)")

CHILD = r"""
import json, sys
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
for path in sys.argv[1:]:
    try:
        d = diagnose(DiagnoseRequest(target=path))
    except Exception as e:  # an old engine's crash on a log is a verdict too: none
        print(json.dumps({"path": path, "error": str(e)[:200]}), flush=True)
        continue
    top = next((e for e in d.evidence if e.kind in ("signature", "traceback", "anomaly", "stop", "source")), None)
    print(json.dumps({"path": path, "predicted": d.primary_cause.value if d.primary_cause else None,
                      "confidence": d.primary_cause_confidence,
                      "top_kind": top.kind if top else None, "top_text": top.text[:200] if top else None}), flush=True)
"""


def batches() -> list[tuple[str, list[int]]]:
    """(commit, case numbers) for every History row scored on named cases before the changes they prompted."""
    # the first row: the engine before this scorer existed, not yet tuned on any corpus log (cases 001-070)
    out: list[tuple[str, list[int]]] = [(HISTORY[0][0].split()[0], list(range(1, 71)))]
    for engine, *_ in HISTORY:
        if " on case" not in engine:
            continue
        parts = _PART.findall(engine)
        if parts:  # "8f4b5dc (131-135) and 1b2cc49 (136-137) on cases 131-137 only"
            out += [(h, list(range(int(a), int(b) + 1))) for h, a, b in parts]
            continue
        commit = _HASH.search(engine)
        scope = engine.split(" on case", 1)[1]
        nums: list[int] = []
        for a, b in re.findall(r"(\d+)(?:-(\d+))?", scope):
            nums += list(range(int(a), int(b or a) + 1))
        if commit:
            out.append((commit.group(0), nums))
    return out


def healthy_batches() -> list[tuple[str, list[int]]]:
    """(commit, case numbers) for the healthy set: each case with the first History row that scored it (a later row on
    the same cases is a tuned re-score, not a prospective one)."""
    rows = json.loads((ROOT / "bench" / "history.json").read_text())["healthy"]["rows"]
    seen: set[int] = set()
    out: list[tuple[str, list[int]]] = []
    for r in rows:
        engine = r["engine"]
        commit = _HASH.search(engine)
        if " on case" not in engine or commit is None:
            continue
        nums = [n for a, b in re.findall(r"(\d+)(?:-(\d+))?", engine.split(" on case", 1)[1])
                for n in range(int(a), int(b or a) + 1) if n not in seen]
        seen.update(nums)
        if nums:
            out.append((commit.group(0), nums))
    return out


def extract(commit: str, into: Path) -> Path:
    raw = subprocess.run(["git", "archive", "--format=tar", commit, "server"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(raw)) as tar:
        tar.extractall(into, filter="data")
    return into / "server"


def _score(batches: list[tuple[str, list[int]]], folder: Path, label: Callable[[dict], dict], tmp: str) -> list[dict]:
    """Each batch's cases run by the engine of its commit: one record a case, its label's fields from `label`."""
    cases_by_no = {int(p.name.split("-")[0]): p for p in folder.iterdir() if p.name.split("-")[0].isdigit()}
    records = []
    for commit, nums in batches:
        cases = [cases_by_no[n] for n in nums if n in cases_by_no and (cases_by_no[n] / "train.log").is_file()]
        if not cases:
            continue
        server = extract(commit, Path(tmp) / commit) if not (Path(tmp) / commit).exists() else Path(tmp) / commit / "server"
        proc = subprocess.run([sys.executable, "-c", CHILD, *(str(c / "train.log") for c in cases)],
                              env={"PYTHONPATH": str(server), "PATH": "/usr/bin:/bin", "HOME": tmp},
                              capture_output=True, text=True, timeout=1800, check=False)
        by_path = {json.loads(x)["path"]: json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")}
        for c in cases:
            r = by_path.get(str(c / "train.log"), {"error": (proc.stderr or "no output")[-200:]})
            records.append({"case": c.name, "commit": commit, **label(json.loads((c / "case.json").read_text())),
                            **{k: v for k, v in r.items() if k != "path"}})
        print(f"{commit}: {len(cases)} {folder.name} cases, {sum(1 for r in records[-len(cases):] if 'error' in r)} errors",
              file=sys.stderr)
    return records


def _healthy_label(meta: dict) -> dict:
    """A run that did not fail has no right class (any class named is a false alarm); a degraded one has its stated
    class, or none to judge by."""
    return {"expected": meta.get("expected_class"), "acceptable": [], "run_status": meta["run_status"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "prospective.json")
    ap.add_argument("--healthy-out", type=Path, default=ROOT / "bench" / "prospective_healthy.json")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        records = _score(batches(), ROOT / "tests" / "corpus",
                         lambda m: {"expected": m["primary_cause"], "acceptable": m.get("acceptable", [])}, tmp)
        healthy = _score(healthy_batches(), ROOT / "tests" / "healthy", _healthy_label, tmp)
    a.out.write_text(json.dumps(records, indent=1) + "\n")
    a.healthy_out.write_text(json.dumps(healthy, indent=1) + "\n")
    print(f"wrote {len(records)} verdicts to {a.out} and {len(healthy)} to {a.healthy_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
