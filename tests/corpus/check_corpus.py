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
DIR_RE = re.compile(r"^\d{3}-[a-z0-9][a-z0-9-]*$")
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
    raw = open(log_p, "rb").read()
    if not raw.strip():
        errs.append("train.log is empty")
    if len(raw) > MAX_LOG_BYTES:
        errs.append("train.log larger than 200 KB")
    try:
        log = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return errs + ["train.log is not UTF-8: %s" % e], None
    if "```" in log:
        errs.append("train.log still contains markdown fences")
    try:
        case = json.load(open(case_p, encoding="utf-8"))
    except ValueError as e:
        return errs + ["case.json is not valid JSON: %s" % e], None
    if not KEYS <= set(case) <= KEYS | OPTIONAL:
        missing, extra = KEYS - set(case), set(case) - KEYS - OPTIONAL
        errs.append("keys: missing=%s extra=%s" % (sorted(missing), sorted(extra)))
    pc = case.get("primary_cause")
    if pc not in CLASSES:
        errs.append("bad primary_cause %r" % pc)
    acc = case.get("acceptable")
    if not isinstance(acc, list) or any(a not in CLASSES for a in acc):
        errs.append("acceptable must be a list of class names")
    elif pc in acc:
        errs.append("acceptable must not repeat primary_cause")
    if case.get("framework") not in FRAMEWORKS:
        errs.append("bad framework %r" % case.get("framework"))
    if case.get("run_status") not in STATUSES:
        errs.append("bad run_status %r" % case.get("run_status"))
    if case.get("label_strength") not in STRENGTHS:
        errs.append("bad label_strength %r" % case.get("label_strength"))
    src, url = case.get("source", ""), case.get("url", "")
    if not (re.match(r"^[\w.-]+/[\w.-]+#\d+$", src) or re.match(r"^[\w.-]+/[\w.-]+:.+@[0-9a-f]{7,40}$", src)):
        errs.append("bad source %r" % src)
    if not url.startswith("https://"):
        errs.append("bad url %r" % url)
    dl = case.get("decisive_lines")
    if not isinstance(dl, list) or not 1 <= len(dl) <= 3:
        errs.append("decisive_lines must be a list of 1-3 strings")
    else:
        for d in dl:
            if not isinstance(d, str) or not d.strip():
                errs.append("empty decisive line")
            elif d not in log:
                errs.append("decisive line not in train.log: %r" % d[:80])
    for k in ("root_cause_summary", "note"):
        if not isinstance(case.get(k), str) or not case.get(k).strip():
            errs.append("%s must be a non-empty string" % k)
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
    errs = ["fix_that_worked: %r is not a fix in catalog/fixes.toml" % f for f in fw if f not in fix_ids()]
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
            digest = hashlib.sha256(open(log_p, "rb").read().strip()).hexdigest()
            if digest in seen:
                errs = errs + ["same train.log as %s" % seen[digest]]
            seen.setdefault(digest, name)
        if case:
            sources[case.get("source")] += 1
        if errs:
            bad += 1
            for e in errs:
                print("%s: %s" % (name, e))
        elif case:
            counts[case["primary_cause"]] += 1
            if case["label_strength"] == "strong":
                strong[case["primary_cause"]] += 1
            if "fix_that_worked" in case:
                planned[case["primary_cause"]] += 1
    for s, n in sources.items():
        if n > 1:
            print("warning: source %s used by %d cases" % (s, n))
    print("\n%-26s %5s %7s %9s" % ("class", "cases", "strong", "fix-label"))
    for c in CLASSES:
        flag = "" if counts[c] >= 3 else "  <-- below 3"
        print("%-26s %5d %7d %9d%s" % (c, counts[c], strong[c], planned[c], flag))
    print("%-26s %5d %7s %9d" % ("total valid", sum(counts.values()), "", sum(planned.values())))
    print("%d case folder(s), %d invalid" % (len(names), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
