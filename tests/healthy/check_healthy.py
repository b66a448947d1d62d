#!/usr/bin/env python3
"""Validate the healthy-log set: every case folder has train.log + case.json, case.json has exactly
the required keys with valid values, the log is UTF-8, fence-free, under 200 KB and not a copy of
another case (here or in tests/corpus). Prints counts per run status. Stdlib only; exit 1 on any
problem."""
import hashlib
import json
import os
import re
import sys
from collections import Counter

CLASSES = [
    "nan-inf", "oom", "optimization-divergence", "cuda-runtime",
    "nccl-distributed", "data-pipeline", "config-error", "io-checkpoint",
    "stalled", "process-crash", "evaluation-mismatch",
    "pipeline-orchestration", "cloud-permissions-quota",
]
FRAMEWORKS = {"pytorch", "lightning", "deepspeed", "fsdp", "hf-trainer", "tensorflow", "keras", "jax",
              "megatron", "ray", "kubeflow", "vertex", "fairseq", "detectron2", "mmdet", "ultralytics",
              "mxnet", "paddle", "caffe", "other"}
# completed: the log shows the planned end; recovered: a spike, overflow or failed attempt the run came back
# from, then went on or finished; degraded: finished (or went on) with poor quality; running: the log stops
# with no error and no end marker (cut, or still being written)
STATUSES = {"completed", "recovered", "degraded", "running"}
STRENGTHS = {"strong", "weak"}
KEYS = {"source", "url", "framework", "run_status", "expected_class", "label_strength", "note"}
DIR_RE = re.compile(r"^\d{3,4}-[a-z0-9][a-z0-9-]*$")
MAX_LOG_BYTES = 200 * 1024


def check_case(path, name):
    errs = []
    log_p, case_p = os.path.join(path, "train.log"), os.path.join(path, "case.json")
    if not DIR_RE.match(name):
        errs.append("folder name must be NNN-short-slug")
    if not os.path.isfile(log_p) or not os.path.isfile(case_p):
        return errs + ["missing train.log or case.json"], None
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
    if set(case) != KEYS:
        errs.append(f"keys: missing={sorted(KEYS - set(case))} extra={sorted(set(case) - KEYS)}")
    if case.get("framework") not in FRAMEWORKS:
        errs.append("bad framework {!r}".format(case.get("framework")))
    status = case.get("run_status")
    if status not in STATUSES:
        errs.append(f"bad run_status {status!r}")
    exp = case.get("expected_class")
    if exp is not None and (exp not in CLASSES or status != "degraded"):
        errs.append("expected_class must be null, or a class name on a degraded run")
    if case.get("label_strength") not in STRENGTHS:
        errs.append("bad label_strength {!r}".format(case.get("label_strength")))
    src, url = case.get("source", ""), case.get("url", "")
    if not (re.match(r"^[\w.-]+/[\w.-]+#\d+$", src) or re.match(r"^[\w.-]+/[\w.-]+:.+@[0-9a-f]{7,40}$", src)):
        errs.append(f"bad source {src!r}")
    if not url.startswith("https://"):
        errs.append(f"bad url {url!r}")
    if not isinstance(case.get("note"), str) or not case["note"].strip():
        errs.append("note must be a non-empty string")
    return errs, case


def _digest(path):
    return hashlib.sha256(open(path, "rb").read().strip()).hexdigest()


def main():
    root = os.path.dirname(os.path.abspath(__file__))
    corpus = os.path.join(os.path.dirname(root), "corpus")
    seen = {}
    if os.path.isdir(corpus):
        for n in sorted(os.listdir(corpus)):
            p = os.path.join(corpus, n, "train.log")
            if os.path.isfile(p):
                seen.setdefault(_digest(p), "corpus/" + n)
    names = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)) and not n.startswith((".", "_")))
    counts, bad, sources = Counter(), 0, Counter()
    for name in names:
        errs, case = check_case(os.path.join(root, name), name)
        log_p = os.path.join(root, name, "train.log")
        if os.path.isfile(log_p):
            d = _digest(log_p)
            if d in seen:
                errs = errs + [f"same train.log as {seen[d]}"]
            seen.setdefault(d, name)
        if case:
            sources[case.get("source")] += 1
        if errs:
            bad += 1
            for e in errs:
                print(f"{name}: {e}")
        elif case:
            counts[case["run_status"]] += 1
    for s, n in sources.items():
        if n > 1:
            print(f"warning: source {s} used by {n} cases")
    print(f"\n{'run_status':<12} {'cases':>5}")
    for s in sorted(STATUSES):
        print(f"{s:<12} {counts[s]:>5}")
    print(f"{'total valid':<12} {sum(counts.values()):>5}")
    print(f"{len(names)} case folder(s), {bad} invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
