"""verify-artifacts: the artifact and provenance contract a model must meet before promotion.

A run directory passes when it holds structurally valid weights, the preprocessing it needs
(tokenizer, label encoder, scaler), held-out metrics, a frozen environment, and a manifest
naming the git commit, the data snapshot (or a hash of the data listing), the environment, the
input/output shape, a timestamp and the run id, with every artifact under a run-scoped prefix,
and when the previous version it would replace still exists (rollback possible). The gate fails
closed: anything missing or unreadable is a FAIL, never a pass by default. Read-only.

Every file is listed and opened through safety/paths: a metrics.json or manifest.json that is a
symlink out of the roots, a FIFO or a link to /dev/zero is a FAIL that says so, never followed,
waited on or read without end. The roots are the MCP call's, or (CLI) the directories named.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from pathlib import Path

from ml_skills.checks.report import Check, CheckReport, Verdict
from ml_skills.collectors.checkpoints import WEIGHT_SUFFIXES, inspect_dir, inspect_file
from ml_skills.errors import InputError, TargetNotFound, UnreadableInput
from ml_skills.safety import paths, untrusted_json

MANIFEST_NAMES = ("manifest.json", "MANIFEST.json", "model_manifest.json", "run_manifest.json")
MANIFEST_FIELDS = ("git_commit", "data_snapshot", "environment", "shape", "timestamp", "run_id")
PREPROCESSING = re.compile(r"(?i)^(tokenizer(_config)?\.json|vocab\.(txt|json)|merges\.txt|spiece\.model|tokenizer\.model|special_tokens_map\.json|preprocessor_config\.json|label_encoder[\w.-]*|labels?\.(json|txt)|classes\.(json|txt)|id2label\.json|label_map[\w.-]*|[\w.-]*scaler[\w.-]*\.(pkl|joblib|json)|feature_(names|spec)[\w.-]*\.json|normali[sz]ation[\w.-]*\.json)$")
METRICS = re.compile(r"(?i)^(metrics|eval_results|test_results|all_results|evaluation|heldout_metrics|scores)[\w.-]*\.json$")
ENVIRONMENT = re.compile(r"(?i)^(requirements[\w.-]*\.txt|environment\.ya?ml|conda[\w.-]*\.ya?ml|pip[-_]freeze\.txt|uv\.lock|poetry\.lock|Pipfile\.lock|conda-lock\.ya?ml|pylock\.toml)$")
MAX_FILES = 5000
HASH_LIMIT = 512 * 1024 * 1024  # hash listed files up to this size each; larger are size-checked only
MAX_JSON_BYTES = 16 * 1024 * 1024  # a manifest or metrics file; real ones are kilobytes


def _files(root: Path) -> list[Path]:
    out: list[Path] = []
    base = Path(root)
    real = paths.contain(base, "dir")
    for d, dirnames, filenames in paths.walk(real):
        dirnames[:] = [n for n in dirnames if not n.startswith(".")]
        for n in filenames:
            out.append(base / d.relative_to(real) / n)
            if len(out) >= MAX_FILES:
                return out
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with paths.open_binary(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _json(path: Path) -> object:
    """A small JSON file, opened confined and read bounded (InputError for a FIFO, a device, a link out)."""
    return untrusted_json.loads(paths.read_capped(path, MAX_JSON_BYTES).decode("utf-8"))


def _weights(root: Path, files: list[Path]) -> Check:
    infos = [inspect_file(p) for p in files if p.name.endswith(WEIGHT_SUFFIXES) and not p.name.endswith(".index.json")]
    index = [p for p in files if p.name.endswith(".index.json")]
    for idx in index:
        infos.append(inspect_dir(idx.parent))
    if not infos:
        return Check(name="weights", verdict=Verdict.FAIL, detail="no weights file (.safetensors, .pt, .bin, .ckpt, .h5, ...)",
                     fix="save the final weights into the run directory")
    bad = [i for i in infos if not i.valid]
    if bad:
        return Check(name="weights", verdict=Verdict.FAIL, detail=f"{Path(bad[0].path).name}: {bad[0].reason}",
                     fix="re-export the weights; a truncated file cannot be promoted")
    total = sum(i.size_bytes for i in infos)
    return Check(name="weights", verdict=Verdict.PASS, detail=f"{len(infos)} file(s), {total / 2**20:.1f} MiB, structure valid")


def _present(name: str, files: list[Path], rx: re.Pattern[str], what: str, fix: str) -> Check:
    hits = [p.name for p in files if rx.match(p.name)]
    if not hits:
        return Check(name=name, verdict=Verdict.FAIL, detail=f"no {what} found", fix=fix)
    return Check(name=name, verdict=Verdict.PASS, detail=", ".join(sorted(hits)[:6]))


def _metrics(files: list[Path]) -> Check:
    found = [p for p in files if METRICS.match(p.name)]
    if not found:
        return Check(name="held-out metrics", verdict=Verdict.FAIL, detail="no metrics file (metrics.json, eval_results.json, test_results.json)",
                     fix="evaluate on the held-out split and save the metrics with the model")
    for p in found:
        try:
            data = _json(p)
        except InputError as e:
            return Check(name="held-out metrics", verdict=Verdict.FAIL, detail=f"{p.name} not read: {e}",
                         fix="keep the metrics file itself (not a link out of the run directory) in the run directory")
        except (OSError, ValueError) as e:
            return Check(name="held-out metrics", verdict=Verdict.FAIL, detail=f"{p.name} is not valid JSON ({e})", fix="rewrite the metrics file")
        nums = {k: v for k, v in (data.items() if isinstance(data, dict) else []) if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if nums:
            bad = [k for k, v in nums.items() if not math.isfinite(v)]
            if bad:
                return Check(name="held-out metrics", verdict=Verdict.FAIL, detail=f"{p.name}: non-finite {', '.join(bad)}", fix="re-run evaluation")
            shown = ", ".join(f"{k}={v:g}" for k, v in list(nums.items())[:4])
            return Check(name="held-out metrics", verdict=Verdict.PASS, detail=f"{p.name}: {shown}")
    return Check(name="held-out metrics", verdict=Verdict.FAIL, detail="metrics files hold no numeric metric", fix="save numeric held-out metrics")


def _manifest(root: Path, files: list[Path]) -> tuple[Check, Check, dict]:
    path = next((p for p in files if p.name in MANIFEST_NAMES), None)
    if path is None:
        fail = Check(name="manifest", verdict=Verdict.FAIL, detail=f"no {MANIFEST_NAMES[0]}",
                     fix=f"write manifest.json with {', '.join(MANIFEST_FIELDS)} (and file hashes)")
        return fail, Check(name="run-scoped prefix", verdict=Verdict.FAIL, detail="no run_id to check the prefix against",
                           fix="put every artifact under a prefix named for the run id"), {}
    try:
        data = _json(path)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")  # noqa: TRY004 - caught below with the other unreadable-manifest errors
    except (OSError, ValueError, InputError) as e:
        fail = Check(name="manifest", verdict=Verdict.FAIL, detail=f"{path.name} unreadable: {e}", fix="rewrite the manifest")
        return fail, Check(name="run-scoped prefix", verdict=Verdict.FAIL, detail="manifest unreadable"), {}
    missing = [f for f in MANIFEST_FIELDS if not data.get(f)]
    problems = []
    listed = data.get("files") or {}
    if isinstance(listed, dict):
        for rel, want in list(listed.items())[:500]:
            target = (path.parent / rel)
            try:
                target.resolve().relative_to(root.resolve())
            except ValueError:
                problems.append(f"{rel} points outside the run directory")
                continue
            except RuntimeError:  # twenty-first round: a link loop was "internal error" (CLI) / "failed unexpectedly" (MCP)
                problems.append(f"{rel} is a link that runs into a loop")
                continue
            try:
                real = paths.contain(target, "file")
                if isinstance(want, str) and len(want) == 64 and os.stat(real).st_size <= HASH_LIMIT and _sha256(target) != want.lower():
                    problems.append(f"{rel} does not match its sha256 in the manifest")
            except TargetNotFound:
                problems.append(f"{rel} is listed but missing")
            except InputError as e:
                problems.append(f"{rel} not read: {e}")
    if missing or problems:
        detail = "; ".join(([f"missing fields: {', '.join(missing)}"] if missing else []) + problems[:5])
        mcheck = Check(name="manifest", verdict=Verdict.FAIL, detail=detail, fix="complete the manifest and re-hash the files")
    else:
        mcheck = Check(name="manifest", verdict=Verdict.PASS, detail=f"{path.name}: all {len(MANIFEST_FIELDS)} fields" + (f", {len(listed)} file hashes verified" if listed else ""))
    run_id = str(data.get("run_id") or "")
    if run_id and run_id in root.resolve().parts:
        pcheck = Check(name="run-scoped prefix", verdict=Verdict.PASS, detail=f"artifacts are under .../{run_id}/")
    else:
        pcheck = Check(name="run-scoped prefix", verdict=Verdict.FAIL,
                       detail=f"the directory {root} is not named for run_id {run_id or '(none)'}",
                       fix="store artifacts under a prefix that contains the run id, so versions never overwrite each other")
    return mcheck, pcheck, data


def _rollback(previous: str | None, manifest: dict) -> Check:
    prev = previous or manifest.get("previous_version")
    if not prev:
        return Check(name="rollback", verdict=Verdict.FAIL, detail="no previous version named (--previous or manifest previous_version)",
                     fix="record the version this one replaces, and keep it")
    p = Path(str(prev))
    # confined before anything looks at it, and outside the roots one answer whether it exists or not: the manifest's
    # value was made a root of the CLI and read, and an lstat outside the roots told the server's caller what exists
    # there (thirty-third round)
    roots, spelled = paths.active_roots(), Path(os.path.abspath(p))
    outside: str | None = None
    if roots is not None and not any(spelled == r or spelled.is_relative_to(r) for r in roots):
        outside = f"{p} is outside the allowed roots"
    try:
        real = None if outside else paths.contain(p, "any")
    except TargetNotFound:
        return Check(name="rollback", verdict=Verdict.FAIL, detail=f"previous version {p} no longer exists: rollback impossible",
                     fix="restore the previous version before promoting")
    except InputError as e:
        outside = str(e)
    if real is None:
        return Check(name="rollback", verdict=Verdict.FAIL, detail=f"previous version not checked: {outside}",
                     fix="keep the previous version inside the allowed roots")
    files = _files(p) if real.is_dir() else [p]
    w = _weights(p, files)
    if w.verdict is not Verdict.PASS:
        return Check(name="rollback", verdict=Verdict.FAIL, detail=f"previous version {p} is not usable: {w.detail}", fix="restore a valid previous version")
    return Check(name="rollback", verdict=Verdict.PASS, detail=f"previous version {p} exists with valid weights")


REQUIRED = {"weights", "preprocessing", "held-out metrics", "environment", "manifest", "run-scoped prefix", "rollback"}


def verify(run_dir: str | os.PathLike[str], previous: str | None = None, *, first_version: bool = False) -> CheckReport:
    root = Path(run_dir)
    if not root.exists():
        raise TargetNotFound(f"no directory at {root}")
    if not root.is_dir():
        raise UnreadableInput(f"{root} is not a directory: give the run's artifact directory")
    with paths.scope(root):
        checks, manifest = _contract(root)
    required = set(REQUIRED)
    if first_version:
        checks.append(Check(name="rollback", verdict=Verdict.SKIP, detail="first version: nothing to roll back to"))
        required.discard("rollback")
    else:
        with paths.scope(root, _previous_root(root, previous, manifest)):
            checks.append(_rollback(previous, manifest))
    facts = {k: str(manifest[k]) for k in ("run_id", "git_commit") if manifest.get(k)}
    return CheckReport.gate("verify-artifacts", str(root), checks, required, facts)


def _previous_root(root: Path, previous: str | None, manifest: dict) -> str | None:
    """The CLI's second root: the version the person named (--previous), or the manifest's previous_version only when it
    is a sibling of the run's folder (versions kept side by side: models/run-001 beside models/run-002). A manifest
    naming any other folder made it a root and had it read (thirty-third round); it is reported outside the roots."""
    if previous:
        return str(previous)
    prev = manifest.get("previous_version")
    if not isinstance(prev, str) or not prev.strip():
        return None
    spelled = Path(os.path.abspath(prev))  # as _rollback reads it
    return str(spelled) if spelled.parent == Path(os.path.abspath(root)).parent and spelled != Path(os.path.abspath(root)) else None


def _contract(root: Path) -> tuple[list[Check], dict]:
    files = _files(root)
    mcheck, pcheck, manifest = _manifest(root, files)
    checks = [
        _weights(root, files),
        _present("preprocessing", files, PREPROCESSING, "preprocessing artifact (tokenizer, label encoder, scaler, preprocessor config)",
                 "save the tokenizer / label encoder / scaler the model was trained with"),
        _metrics(files),
        _present("environment", files, ENVIRONMENT, "frozen environment (requirements.txt, environment.yml, a lock file)",
                 "pip freeze > requirements.txt (or the lock file) into the run directory"),
        mcheck,
        pcheck,
    ]
    return checks, manifest
