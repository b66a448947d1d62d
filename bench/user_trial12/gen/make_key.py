"""Build key.json: find each decisive line by its text in the stored case files and record file, line number, text."""
import glob
import json
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "/work/trial12"
OUT = sys.argv[2] if len(sys.argv) > 2 else "/work/trial12-key/key.json"

def find(case, fileglob, pattern, which="first"):
    paths = sorted(glob.glob(os.path.join(ROOT, case, fileglob)))
    assert paths, (case, fileglob)
    path = paths[0]
    hits = []
    with open(path, errors="replace") as f:
        for i, line in enumerate(f, 1):
            if re.search(pattern, line):
                hits.append((i, line.rstrip("\n")))
    assert hits, (case, fileglob, pattern)
    i, text = hits[0] if which == "first" else hits[-1]
    return {"file": os.path.relpath(path, os.path.join(ROOT, case)), "line": i, "text": text}

def files(case):
    out = {}
    base = os.path.join(ROOT, case)
    for dp, _, fs in os.walk(base):
        for fn in sorted(fs):
            p = os.path.join(dp, fn)
            with open(p, "rb") as f:
                data = f.read()
            out[os.path.relpath(p, base)] = {"bytes": len(data), "lines": data.count(b"\n")}
    return dict(sorted(out.items()))

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "key_spec.json")) as f:
    SPEC = json.load(f)
key = {}
for case, s in SPEC.items():
    key[case] = {"primary_class": s["primary_class"], "acceptable": s["acceptable"], "run_status": s["run_status"],
                 "decisive_lines": [find(case, *d) for d in s["decisive"]], "scenario": s["scenario"],
                 "files": files(case)}
with open(OUT, "w") as f:
    json.dump(key, f, indent=1)
for c, v in key.items():
    print(c, v["primary_class"], v["run_status"], [(d["file"], d["line"]) for d in v["decisive_lines"]],
          sum(x["bytes"] for x in v["files"].values()))
