"""Score a new batch prospectively, and see which verdicts a change moves.

    python bench/verdicts.py score COMMIT corpus|healthy LO HI   # the engine of COMMIT on cases LO-HI, with their labels
    python bench/verdicts.py run [--server DIR] OUT.json        # every corpus, healthy and real log: class and status
    python bench/verdicts.py diff [--plan] OLD.json NEW.json    # the logs whose verdict (or first 3 fixes) moved

`score` is how a batch is measured before any change made for it (issue 13's habit): the engine is taken from the
named commit with git archive, so the working tree's changes cannot leak in. `run` + `diff` are how a change is
checked against every log we hold: only the verdicts it was meant to move should move.

Stdlib and git only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prospective import ROOT, extract

CHILD = r"""
import json, sys
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
for path in sys.argv[1:]:
    try:
        d = diagnose(DiagnoseRequest(target=path))
    except Exception as e:
        print(json.dumps({"path": path, "error": str(e)[:200]}), flush=True)
        continue
    print(json.dumps({"path": path, "cls": d.primary_cause.value if d.primary_cause else None,
                      "status": d.run_status.value, "conf": round(d.primary_cause_confidence, 2),
                      "proximate": d.root_cause.proximate[:160], "plan": [f.fix_id for f in d.fixes[:3]]}), flush=True)
"""

HEALTHY_RIGHT = {"completed": {"completed"}, "recovered": {"recovered", "completed"}, "degraded": {"degraded"},
                 "running": {"running", "unknown"}}


def _cases(suite: str, lo: int = 0, hi: int = 10**9) -> list[Path]:
    base = ROOT / "tests" / suite
    return [p for p in sorted(base.iterdir()) if p.name[:3].isdigit() and lo <= int(p.name.split("-")[0]) <= hi
            and (p / "train.log").is_file()]


def _run(server: Path, logs: list[Path], tmp: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for i in range(0, len(logs), 200):  # one child per 200 logs: a crash loses few
        part = logs[i:i + 200]
        proc = subprocess.run([sys.executable, "-c", CHILD, *map(str, part)],
                              env={"PYTHONPATH": str(server), "PATH": "/usr/bin:/bin", "HOME": tmp},
                              capture_output=True, text=True, timeout=7200, check=False)
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                out[r.pop("path")] = r
        for p in part:
            out.setdefault(str(p), {"error": (proc.stderr or "no output")[-300:]})
    return out


def score(commit: str, suite: str, lo: int, hi: int) -> int:
    cases = _cases(suite, lo, hi)
    with tempfile.TemporaryDirectory() as tmp:
        got = _run(extract(commit, Path(tmp) / commit), [c / "train.log" for c in cases], tmp)
    right = wrong = abst = fa = st = 0
    for c in cases:
        meta = json.loads((c / "case.json").read_text())
        r = got[str(c / "train.log")]
        cls, status = r.get("cls"), r.get("status")
        if suite == "corpus":
            ok = cls == meta["primary_cause"] or cls in meta.get("acceptable", [])
            mark = "right" if ok else ("abst" if cls is None else "WRONG")
            right, wrong, abst = right + (mark == "right"), wrong + (mark == "WRONG"), abst + (mark == "abst")
            label = f"{meta['primary_cause']} / {meta.get('run_status')}"
        else:
            alarm = meta["run_status"] != "degraded" and cls is not None
            sok = status in HEALTHY_RIGHT[meta["run_status"]]
            fa, st = fa + alarm, st + sok
            mark = ("FA " if alarm else "") + ("status-ok" if sok else "STATUS")
            label = f"{meta['run_status']} / {meta.get('expected_class')}"
        print(f"{c.name[:60]:60} {mark:16} got {cls} / {status} ({r.get('conf')}) want {label}"
              + (f"  ERROR {r['error']}" if "error" in r else ""))
    n = len(cases)
    if suite == "corpus":
        print(f"\n{commit} corpus {lo}-{hi}: {right}/{n} right, {wrong} wrong, {abst} abstained")
    else:
        print(f"\n{commit} healthy {lo}-{hi}: {fa}/{n} false alarms, status {st}/{n}")
    return 0


def run_all(server: Path, out: Path) -> int:
    logs = [c / "train.log" for s in ("corpus", "healthy", "real-logs") for c in _cases(s)]
    with tempfile.TemporaryDirectory() as tmp:
        got = _run(server, logs, tmp)
    rel = {str(Path(k).relative_to(ROOT / "tests")): v for k, v in got.items()}
    out.write_text(json.dumps(rel, indent=0, sort_keys=True) + "\n")
    print(f"{len(rel)} verdicts to {out}", file=sys.stderr)
    return 0


def diff(old: Path, new: Path, plan: bool = False) -> int:
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    moved = 0
    for k in sorted(set(a) & set(b)):  # a case added since OLD was run is a new case, not a moved verdict
        x, y = a[k], b[k]
        if (x.get("cls"), x.get("status")) == (y.get("cls"), y.get("status")):
            if plan and x.get("plan") != y.get("plan"):
                moved += 1
                print(f"{k.rsplit('/', 1)[0][:70]:70} plan {x.get('plan')} -> {y.get('plan')}")
            continue
        moved += 1
        meta = json.loads((ROOT / "tests" / Path(k).parent / "case.json").read_text())
        want = meta.get("primary_cause") or meta.get("expected_class")
        print(f"{k.rsplit('/', 1)[0][:70]:70} {x.get('cls')}/{x.get('status')} -> {y.get('cls')}/{y.get('status')}"
              f"   label {want}/{meta.get('run_status')}")
    print(f"{moved} moved of {len(b)}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("commit")
    s.add_argument("suite", choices=["corpus", "healthy"])
    s.add_argument("lo", type=int)
    s.add_argument("hi", type=int)
    r = sub.add_parser("run")
    r.add_argument("--server", type=Path, default=ROOT / "server")
    r.add_argument("out", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("--plan", action="store_true", help="also list logs whose first three fixes moved")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "score":
        return score(a.commit, a.suite, a.lo, a.hi)
    if a.cmd == "run":
        return run_all(a.server, a.out)
    return diff(a.old, a.new, a.plan)


if __name__ == "__main__":
    sys.exit(main())
