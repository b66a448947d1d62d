#!/usr/bin/env python3
"""Validate the real-log corpus: every case folder has train.log + case.json,
case.json has exactly the required keys, class names are valid, and every
decisive line is a verbatim substring of train.log, and no two cases hold the
same train.log (a copy counts one real failure twice). The optional plan label
(fix_that_worked, fix_note) names fixes that exist in the fix catalog. Prints
per-class counts. Stdlib only. Exit status 1 on any problem."""
import functools
import hashlib
import json
import os
import re
import sys
import tomllib
from collections import Counter

CLASSES = [
    "nan-inf", "oom", "optimization-divergence", "cuda-runtime",
    "nccl-distributed", "data-pipeline", "config-error", "io-checkpoint",
    "stalled", "process-crash", "evaluation-mismatch",
    "pipeline-orchestration", "cloud-permissions-quota",
]
FRAMEWORKS = {"pytorch", "lightning", "deepspeed", "fsdp", "hf-trainer",
              "tensorflow", "jax", "megatron", "ray", "kubeflow", "vertex", "other"}
STATUSES = {"crashed", "hung", "degraded", "diverged", "recovered", "completed"}
STRENGTHS = {"strong", "weak"}
KEYS = {"source", "url", "primary_cause", "acceptable", "framework",
        "decisive_lines", "run_status", "label_strength",
        "root_cause_summary", "note"}
# the recovery-plan label: which catalog fixes match what the thread says worked (bench/accuracy.py scores it)
OPTIONAL = {"fix_that_worked", "fix_note"}
FIXES_TOML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "server", "ml_skills", "catalog", "fixes.toml")
DIR_RE = re.compile(r"^\d{3,4}-[a-z0-9][a-z0-9-]*$")
MAX_LOG_BYTES = 200 * 1024


def check_case(path, name):
    errs = []
    log_p = os.path.join(path, "train.log")
    case_p = os.path.join(path, "case.json")
    if not DIR_RE.match(name):
        errs.append("folder name must be NNN-short-slug")
    if not os.path.isfile(log_p):
        return errs + ["missing train.log"], None
    if not os.path.isfile(case_p):
        return errs + ["missing case.json"], None
    with open(log_p, "rb") as f:
        raw = f.read()
    if not raw.strip():
        errs.append("train.log is empty")
    if len(raw) > MAX_LOG_BYTES:
        errs.append("train.log larger than 200 KB")
    try:
        log = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return errs + [f"train.log is not UTF-8: {e}"], None
    if "```" in log:
        errs.append("train.log still contains markdown fences")
    try:
        with open(case_p, encoding="utf-8") as f:
            case = json.load(f)
    except ValueError as e:
        return errs + [f"case.json is not valid JSON: {e}"], None
    if not KEYS <= set(case) <= KEYS | OPTIONAL:
        missing, extra = KEYS - set(case), set(case) - KEYS - OPTIONAL
        errs.append(f"keys: missing={sorted(missing)} extra={sorted(extra)}")
    pc = case.get("primary_cause")
    if pc not in CLASSES:
        errs.append(f"bad primary_cause {pc!r}")
    acc = case.get("acceptable")
    if not isinstance(acc, list) or any(a not in CLASSES for a in acc):
        errs.append("acceptable must be a list of class names")
    elif pc in acc:
        errs.append("acceptable must not repeat primary_cause")
    if case.get("framework") not in FRAMEWORKS:
        errs.append(f"bad framework {case.get('framework')!r}")
    if case.get("run_status") not in STATUSES:
        errs.append(f"bad run_status {case.get('run_status')!r}")
    if case.get("label_strength") not in STRENGTHS:
        errs.append(f"bad label_strength {case.get('label_strength')!r}")
    src, url = case.get("source", ""), case.get("url", "")
    if not (re.match(r"^[\w.-]+/[\w.-]+#\d+$", src) or re.match(r"^[\w.-]+/[\w.-]+:.+@[0-9a-f]{7,40}$", src)):
        errs.append(f"bad source {src!r}")
    if not url.startswith("https://"):
        errs.append(f"bad url {url!r}")
    dl = case.get("decisive_lines")
    if not isinstance(dl, list) or not 1 <= len(dl) <= 3:
        errs.append("decisive_lines must be a list of 1-3 strings")
    else:
        for d in dl:
            if not isinstance(d, str) or not d.strip():
                errs.append("empty decisive line")
            elif d not in log:
                errs.append(f"decisive line not in train.log: {d[:80]!r}")
    for k in ("root_cause_summary", "note"):
        if not isinstance(case.get(k), str) or not case.get(k).strip():
            errs.append(f"{k} must be a non-empty string")
    errs += check_plan_label(case)
    return errs, case


@functools.lru_cache(maxsize=1)
def fix_ids():
    with open(FIXES_TOML, "rb") as f:
        return {fx["id"] for fx in tomllib.load(f)["fix"]}


def check_plan_label(case):
    """fix_that_worked: a list of catalog fix ids ([] when no catalog fix matches, and then fix_note says what worked)."""
    if "fix_that_worked" not in case:
        return ["fix_note without fix_that_worked"] if "fix_note" in case else []
    fw, note = case["fix_that_worked"], case.get("fix_note")
    if not isinstance(fw, list) or any(not isinstance(f, str) for f in fw):
        return ["fix_that_worked must be a list of fix ids"]
    errs = [f"fix_that_worked: {f!r} is not a fix in catalog/fixes.toml" for f in fw if f not in fix_ids()]
    if not isinstance(note, str) or not note.strip():
        errs.append("fix_note must say what worked (required with fix_that_worked)")
    return errs


def main():
    root = os.path.dirname(os.path.abspath(__file__))
    counts, strong, bad = Counter(), Counter(), 0
    planned = Counter()
    sources = Counter()
    names = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)) and not n.startswith((".", "_")))
    seen = {}
    for name in names:
        errs, case = check_case(os.path.join(root, name), name)
        log_p = os.path.join(root, name, "train.log")
        if os.path.isfile(log_p):
            with open(log_p, "rb") as f:
                digest = hashlib.sha256(f.read().strip()).hexdigest()
            if digest in seen:
                errs = errs + [f"same train.log as {seen[digest]}"]
            seen.setdefault(digest, name)
        if case:
            sources[case.get("source")] += 1
        if errs:
            bad += 1
            for e in errs:
                print(f"{name}: {e}")
        elif case:
            counts[case["primary_cause"]] += 1
            if case["label_strength"] == "strong":
                strong[case["primary_cause"]] += 1
            if "fix_that_worked" in case:
                planned[case["primary_cause"]] += 1
    for s, n in sources.items():
        if n > 1:
            print(f"warning: source {s} used by {n} cases")
    print(f"\n{'class':<26} {'cases':>5} {'strong':>7} {'fix-label':>9}")
    for c in CLASSES:
        flag = "" if counts[c] >= 3 else "  <-- below 3"
        print(f"{c:<26} {counts[c]:>5d} {strong[c]:>7d} {planned[c]:>9d}{flag}")
    print(f"{'total valid':<26} {sum(counts.values()):>5d} {'':>7} {sum(planned.values()):>9d}")
    print(f"{len(names)} case folder(s), {bad} invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
