"""An MLflow run as evidence: state, params, every history point, artifacts and the run's logs.

The tracking store comes from MLFLOW_TRACKING_URI. A server (http/https) is read through its
REST API with our own deadline, bounded retries and one-line errors (the SDK's retry loop
can sleep for minutes); a local store (a directory, file:, sqlite:) is read through the
mlflow SDK, imported only here. Read-only: nothing is downloaded to disk.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from ml_skills.collectors import tracker
from ml_skills.collectors.http_api import Deadline, fetch_tail, request_json
from ml_skills.errors import InputError, SourceError, SourceUnavailable, TargetNotFound
from ml_skills.models import CollectRequest, Progress, RawEvidence
from ml_skills.safety import paths
from ml_skills.safety.programs import set_for_this_process
from ml_skills.safety.redact import redact, redact_cut

if TYPE_CHECKING:
    import httpx


def quiet() -> None:
    """Called before mlflow is imported: its import starts a telemetry client that creates ~/.config/mlflow/telemetry.json
    (an installation id) and sends usage events; reading a run must write nothing and call no one else (seventy-sixth
    round: get_mlflow_run, diagnose and the CLI each created the file)."""
    set_for_this_process("MLFLOW_DISABLE_TELEMETRY", "true")


PAGE = 25_000  # the server's own cap on one page of metric history
MAX_KEYS = 64
MAX_HISTORY_POINTS = 1_000_000  # metric points kept over all keys: about 140 MB as tuples
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    run_id = (req.mlflow or "").strip()
    if not _RUN_ID.fullmatch(run_id):
        raise InputError(f"--mlflow expects a run id (letters, digits, '-' or '_'), got {redact_cut(run_id, 80)!r}")
    uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if not uri:
        raise InputError(
            "--mlflow needs MLFLOW_TRACKING_URI: the tracking server URL (http://host:5000), "
            "a local store directory, or sqlite:///path/mlflow.db"
        )
    run = tracker.TrackerRun(kind="mlflow", name=run_id)
    run.facts["tracking store"] = redact(uri)
    if uri.startswith(("http://", "https://")):
        _from_server(uri, run_id, run)
    elif (store := _file_store(uri)) is not None:
        run = _from_file_store(store, run_id, uri)
    else:
        _from_store(uri, run_id, run)
    return tracker.to_evidence(run)


def _scheme(uri: str) -> str:
    """The tracking URI's scheme in lower case ('' for a bare path)."""
    return uri.split(":", 1)[0].lower() if re.match(r"^[A-Za-z][\w+.-]*:", uri) else ""


def _file_store(uri: str) -> Path | None:
    """The folder of a file store (file:///.../mlruns or a bare path), checked to exist; None for any other store."""
    scheme = _scheme(uri)
    if scheme not in ("", "file"):
        return None
    _check_store(uri)
    return Path(unquote(urlparse(uri).path) if scheme else uri)


def _from_file_store(store: Path, run_id: str, uri: str) -> tracker.TrackerRun:
    """A file store read as the plain files it is (collectors/runstores), as a run directory's own mlruns/ is: MLflow
    3's client refuses the file store unless MLFLOW_ALLOW_FILE_STORE is set, and would create a default experiment on
    open. The run is the folder named by its id under one of the store's experiments."""
    from ml_skills.collectors import runstores

    found = next((e / run_id for e in runstores.subdirs(store) if runstores.is_mlflow_run(e / run_id)), None)
    if found is None:
        raise TargetNotFound(f"no MLflow run {run_id} in {redact(uri)}: check the run id and MLFLOW_TRACKING_URI")
    run = runstores.mlflow_run(found)
    run.facts["tracking store"] = redact(uri)
    return run


# ---------------------------------------------------------------- tracking server (REST)


def _from_server(uri: str, run_id: str, run: tracker.TrackerRun) -> None:
    import httpx

    auth: Any = None
    headers = {}
    if os.environ.get("MLFLOW_TRACKING_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    elif os.environ.get("MLFLOW_TRACKING_USERNAME"):
        auth = (os.environ["MLFLOW_TRACKING_USERNAME"], os.environ.get("MLFLOW_TRACKING_PASSWORD", ""))
    deadline = Deadline(tracker.deadline_s())
    with httpx.Client(base_url=uri.rstrip("/"), headers=headers, auth=auth, follow_redirects=False) as client:

        def call(endpoint: str, what: str, /, **params: Any) -> Any:
            return request_json(
                client, "GET", f"/api/2.0/mlflow/{endpoint}", params=params, name="the MLflow server", what=what, deadline=deadline
            )

        body = call("runs/get", f"run {run_id}", run_id=run_id)
        info, data = _run_parts(body)
        _info(run, info, data.get("params", []), data.get("tags", []))
        latest = data.get("metrics", [])
        run.summary = {str(m.get("key")): m.get("value") for m in latest if isinstance(m, dict)}
        left = MAX_HISTORY_POINTS
        for key in _keys(run, latest):
            try:
                left -= _server_history(call, run_id, key, run, left)
            except SourceError as e:
                run.missing.append(f"history of {key}: {e}")
                if deadline.left() <= 0:
                    break
        try:
            _list_server_artifacts(call, run_id, run)
        except SourceError as e:
            run.missing.append(f"artifact listing: {e}")
        for path in [a for a in run.artifacts if tracker.is_log_name(a)][: tracker.MAX_LOGS]:
            try:
                data_bytes, cut = _get_artifact(client, run_id, path, deadline)
                run.logs[path] = (data_bytes.decode("utf-8", errors="replace"), cut)
            except SourceError as e:
                run.missing.append(f"log {path}: {e}")


def _server_history(call: Any, run_id: str, key: str, run: tracker.TrackerRun, left: int) -> int:
    """One metric's history, page by page, kept as (step, timestamp, value) and cut at `left` points (and at
    tracker.MAX_ROWS for one metric); how many points were kept. Before the nineteenth round a server that always sent a
    next_page_token had every page kept as parsed dicts until the deadline: 2.6 GB in 60 s over loopback."""
    token: str | None = None
    points: list[tuple[float, float | None, Any]] = []
    cap = max(0, min(left, tracker.MAX_ROWS))
    if cap == 0:
        run.missing.append(f"history of {key}: not read (the metrics before it used the {MAX_HISTORY_POINTS:,} points kept)")
        return 0
    while len(points) < cap:
        params: dict[str, Any] = {"run_id": run_id, "metric_key": key, "max_results": PAGE}
        if token:
            params["page_token"] = token
        page = call("metrics/get-history", f"history of {key}", **params)
        if not isinstance(page, dict):
            raise SourceUnavailable(f"the MLflow server sent a malformed history page for {key}")
        points.extend(_point(m) for m in (page.get("metrics", []) or [])[: cap - len(points)] if isinstance(m, dict))
        token = page.get("next_page_token") or None
        if not token:
            break
    else:
        run.missing.append(f"history of {key}: cut at {len(points):,} points (the server had more pages)")
    _history(run, key, points)
    return len(points)


def _point(m: dict[str, Any]) -> tuple[float, float | None, Any]:
    return _step(m), tracker.to_float(_num(m.get("timestamp"))), m.get("value")


def _get_artifact(client: httpx.Client, run_id: str, path: str, deadline: Deadline) -> tuple[bytes, bool]:
    from urllib.parse import urlencode

    url = "/get-artifact?" + urlencode({"path": path, "run_uuid": run_id})
    return fetch_tail(
        client, url, name="the MLflow server", what=f"artifact {path}", deadline=deadline, max_bytes=tracker.MAX_LOG_BYTES
    )


def _list_server_artifacts(call: Any, run_id: str, run: tracker.TrackerRun) -> None:
    todo = [""]
    while todo and len(run.artifacts) < tracker.MAX_ARTIFACTS:
        path = todo.pop(0)
        params = {"run_id": run_id, **({"path": path} if path else {})}
        body = call("artifacts/list", f"artifacts under '{path or '/'}'", **params)
        for f in (body or {}).get("files", []) if isinstance(body, dict) else []:
            p = str(f.get("path", ""))
            if f.get("is_dir"):
                todo.append(p)
            elif len(run.artifacts) < tracker.MAX_ARTIFACTS:
                run.artifacts.append(p)
    if todo:
        run.missing.append(f"artifact listing stopped at {tracker.MAX_ARTIFACTS} files")


def _run_parts(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    r = body.get("run") if isinstance(body, dict) else None
    if not isinstance(r, dict) or not isinstance(r.get("info"), dict):
        raise SourceUnavailable("the MLflow server sent a malformed run (no run.info): is MLFLOW_TRACKING_URI an MLflow server?")
    data = r.get("data")
    return r["info"], data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- local store (SDK)


def _check_store(uri: str) -> None:
    """Refuse any store MLflow would create or migrate on open: reading must never write.

    A missing mlruns directory or sqlite file is created by the SDK, and a database with no
    MLflow tables gets them; so the store must already exist, and a sqlite file must already hold
    MLflow's schema (checked through a read-only connection). Other databases cannot be checked
    without connecting read-write: their MLflow server is the way in.
    """
    scheme = _scheme(uri)
    missing = (f"MLFLOW_TRACKING_URI points at {redact(uri)}, which does not exist: give an existing MLflow store, an mlruns "
               "directory or a sqlite:/// file (nothing was created)")
    if scheme in ("", "file"):
        path = Path(unquote(urlparse(uri).path) if scheme else uri)
        if not path.is_dir():
            raise TargetNotFound(missing)
        return
    if scheme == "sqlite":
        rest = uri.split("?", 1)[0][len("sqlite:"):]
        if not rest.startswith("///") or rest == "///" or ":memory:" in rest:
            raise InputError(f"MLFLOW_TRACKING_URI {redact(uri)}: give sqlite:///relative.db or sqlite:////absolute.db")
        path = Path(unquote(rest[3:]))
        if not path.is_file():
            raise TargetNotFound(missing)
        import sqlite3

        try:
            con = sqlite3.connect(_sqlite_read_only(path), uri=True, timeout=5)
            try:
                tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            finally:
                con.close()
        except sqlite3.Error as e:
            raise SourceUnavailable(f"{redact(str(path))} is not a readable sqlite database ({e})") from None
        if not {"alembic_version", "runs"} <= tables:
            raise SourceUnavailable(f"{redact(str(path))} holds no MLflow tables: not an MLflow store (it was not initialised: "
                                    "reading never creates or migrates a database)")
        return
    raise InputError(f"MLFLOW_TRACKING_URI {redact(uri)}: a {scheme} database is not opened directly (MLflow would create or "
                     "migrate its tables); point MLFLOW_TRACKING_URI at its MLflow server (http://HOST:PORT)")


def _sqlite_path(uri: str) -> Path:
    """The file of a sqlite:/// URI (checked by _check_store first)."""
    return Path(unquote(uri.split("?", 1)[0][len("sqlite:///"):]))


def _wal_mode(path: Path) -> bool:
    """Whether the sqlite file's header says WAL journal mode (its read and write versions are 2)."""
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError:
        return False
    return len(header) == 100 and header[:16] == b"SQLite format 3\x00" and header[18] == 2


def _sqlite_read_only(path: Path) -> str:
    """A file: URI that opens the sqlite file `path` for reading and changes nothing beside it.

    A database in WAL journal mode is opened immutable. mode=ro alone made '-wal' and '-shm' files beside one whose writer
    had closed (thirty-fourth round), and, beside a writer that crashed or still runs, rebuilt the '-shm' index in place
    (thirty-sixth round): SQLite's readers write that file. Immutable reads the database file alone; rows in a '-wal'
    not yet checkpointed into it are not read, and _unread_wal says so in the evidence. A rollback-journal database is
    read with mode=ro, which writes nothing (a hot journal left by a crashed writer is refused, never rolled back)."""
    path = path.resolve()
    return f"{path.as_uri()}?mode=ro" + ("&immutable=1" if _wal_mode(path) else "")


def _unread_wal(path: Path) -> int:
    """Bytes of write-ahead log beside a WAL database that an immutable read leaves unread (0 when there is none)."""
    path = path.resolve()
    try:
        return Path(f"{path}-wal").stat().st_size if _wal_mode(path) else 0
    except OSError:
        return 0


def _read_only_engine(path: Path) -> Any:
    """A SQLAlchemy engine whose every connection is sqlite3's, opened through _sqlite_read_only.

    Handing MLflow a 'sqlite:///file:...?mode=ro&uri=true' URI made it create the URI's parent folders relative to the
    working folder ('file:/abs/...', following a link planted there) before connecting (thirty-fourth round); an engine
    built here is given to MLflow's store ready-made, so MLflow never turns a URI into a path."""
    import sqlite3

    import sqlalchemy
    from sqlalchemy.pool import NullPool

    # the URI is worked out for each connection: the engine lives as long as the server, and a store switched to WAL
    # between two reads was opened mode=ro by the URI of the first and gained -wal and -shm (thirty-seventh round)
    return sqlalchemy.create_engine("sqlite://", creator=lambda: sqlite3.connect(_sqlite_read_only(path), uri=True, timeout=5,
                                                                               check_same_thread=False), poolclass=NullPool)


def _sqlite_client(path: Path) -> Any:
    """An MlflowClient on the sqlite store at `path` through _read_only_engine: the store class keeps the engines it
    made by URI, so the URI the client is given names ours and MLflow connects through it. (read_only_client, its one
    caller, has called quiet().)"""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking import MlflowClient

    engines = getattr(SqlAlchemyStore, "_engine_map", None)
    if not isinstance(engines, dict):
        raise SourceUnavailable("this mlflow cannot be given a read-only database connection: a sqlite store is read with "
                                "mlflow 3 or later (pip install -U mlflow), or through its MLflow server")
    key = f"sqlite:///{path.resolve()}?ml-skills=read-only"
    engines.setdefault(key, _read_only_engine(path))
    return MlflowClient(tracking_uri=key)


def read_only_client(uri: str) -> Any:
    """An MlflowClient on `uri` that cannot write to the store.

    The client creates a missing store, migrates an older one to its schema and inserts a default experiment when it
    opens a store; checking the tables first (_check_store) let a store of an older MLflow through, and it was migrated
    in place, and the CLI's triage created new stores (thirty-third round). So: _check_store first, a sqlite store
    opened through read-only connections (_sqlite_client: a write fails and is refused with its reason, nothing
    changed, nothing created beside the store or in the working folder), and a file store
    never opened through the client (it writes its .trash and default experiment): it is read as plain files."""
    scheme = _scheme(uri)
    quiet()
    from mlflow.tracking import MlflowClient

    if scheme in ("http", "https", "databricks"):
        return MlflowClient(tracking_uri=uri)  # a server: its own store is its business, reached over its API
    _check_store(uri)
    if scheme in ("", "file"):
        raise InputError(f"MLFLOW_TRACKING_URI {redact(uri)} is a file store: opened by MLflow's client it would be written to; "
                         "point MLFLOW_TRACKING_URI at its MLflow server (http://HOST:PORT), or give one run "
                         "(check-failed-run --mlflow RUN_ID reads a file store as plain files)")
    try:
        if scheme == "sqlite":
            client = _sqlite_client(_sqlite_path(uri))
        else:
            client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # the client opens its store on first use: here, where a refusal is caught
    except SourceUnavailable:
        raise
    except Exception as e:  # noqa: BLE001  sqlalchemy, alembic and mlflow raise many types; one line says which
        why = redact_cut(str(e).splitlines()[0] if str(e) else type(e).__name__, 200)
        raise SourceUnavailable(f"MLflow store {redact(uri)} cannot be read without writing to it ({why}): it is left as it "
                                "is (an older store needs `mlflow db upgrade` by its owner first)") from None
    return client


def _from_store(uri: str, run_id: str, run: tracker.TrackerRun) -> None:
    try:
        quiet()
        from mlflow.exceptions import MlflowException
    except ImportError:
        raise InputError("reading a local MLflow store needs the mlflow package: pip install 'ml-skills[mlflow]'") from None
    client = read_only_client(uri)
    if _scheme(uri) == "sqlite" and (unread := _unread_wal(_sqlite_path(uri))):
        run.missing.append(f"the store's write-ahead log ({unread:,} bytes) was not read: rows written since its last "
                           "checkpoint (a live or crashed writer's newest metrics) are not here; reading it would make "
                           "SQLite write its -shm index (run `sqlite3 STORE 'pragma wal_checkpoint'` as its owner to merge it)")
    try:
        r = client.get_run(run_id)
    except MlflowException as e:
        if getattr(e, "error_code", "") == "RESOURCE_DOES_NOT_EXIST" or "not found" in str(e).lower():
            raise TargetNotFound(f"no MLflow run {run_id} in {redact(uri)}: check the run id and MLFLOW_TRACKING_URI") from None
        raise SourceUnavailable(f"MLflow store {redact(uri)}: {redact_cut(str(e).splitlines()[0], 200)}") from None
    info = {
        "status": r.info.status,
        "start_time": r.info.start_time,
        "end_time": r.info.end_time,
        "run_name": r.info.run_name,
        "experiment_id": r.info.experiment_id,
        "artifact_uri": r.info.artifact_uri,
    }
    _info(
        run,
        info,
        [{"key": k, "value": v} for k, v in r.data.params.items()],
        [{"key": k, "value": v} for k, v in r.data.tags.items()],
    )
    run.summary = dict(r.data.metrics)
    latest = [{"key": k} for k in r.data.metrics]
    for key in _keys(run, latest):
        try:
            hist = client.get_metric_history(run_id, key)
            _history(run, key, [_point({"step": m.step, "value": m.value, "timestamp": m.timestamp}) for m in hist])
        except MlflowException as e:
            run.missing.append(f"history of {key}: {redact_cut(str(e).splitlines()[0], 200)}")
    root = _local_dir(r.info.artifact_uri or "")
    if root is None:
        run.missing.append(f"artifacts at {redact(r.info.artifact_uri or '?')} are not on this machine: not read")
        return
    try:  # the tracking server names this directory: confined like a path read from any other data
        root = paths.contain(root, "dir")
        listed: list[Path] = []
        for sub, dirnames, filenames in paths.walk(root, max_depth=6):
            dirnames.sort()
            listed += [sub / n for n in sorted(filenames)]
            if len(listed) >= tracker.MAX_ARTIFACTS:
                break
    except InputError as e:
        run.missing.append(f"artifacts not read: {e}")
        return
    for p in sorted(listed)[: tracker.MAX_ARTIFACTS]:
        if p.is_file() and not p.is_symlink():
            rel = str(p.relative_to(root))
            run.artifacts.append(rel)
            if tracker.is_log_name(rel) and len(run.logs) < tracker.MAX_LOGS:
                try:
                    run.logs[rel] = tracker.read_tail(p)
                except InputError as e:
                    run.missing.append(f"artifact {rel}: {e}")


def _local_dir(artifact_uri: str) -> Path | None:
    """The local folder an artifact URI names (a path or file://), looked at only by `paths.contain`: before the fifty-seventh
    round an is_dir() here, before confinement, told a folder outside the roots that exists ("outside the allowed roots")
    from one that does not ("not on this machine")."""
    u = urlparse(artifact_uri)
    if u.scheme in ("", "file") and artifact_uri:
        return Path(unquote(u.path) if u.scheme else artifact_uri)
    return None


# ---------------------------------------------------------------- shared


def _info(run: tracker.TrackerRun, info: dict[str, Any], params: list[Any], tags: list[Any]) -> None:
    run.state = str(info.get("status") or "") or None
    for k, label in (("run_name", "run name"), ("experiment_id", "experiment")):
        if info.get(k):
            run.facts[label] = str(info[k])
    for k, label in (("start_time", "started"), ("end_time", "ended")):
        t = tracker.to_float(_num(info.get(k)))
        if t and 0 < t < 1e14:  # the server's number: 2**62 ms (year 146,140,482) is no time, and datetime refuses it
            run.facts[label] = datetime.fromtimestamp(t / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    run.config = {str(p.get("key")): p.get("value") for p in params if isinstance(p, dict)}
    tagd = {str(t.get("key")): str(t.get("value")) for t in tags if isinstance(t, dict)}
    # redacted before the cut: a note quoting `https://u:PW@host` across character 200 kept `https://u:PW`, no URL to the
    # redactor, until the fifteenth round (the source names a script, or a repository URL holding a token as its user)
    if tagd.get("mlflow.note.content"):
        run.facts["note"] = redact(tagd["mlflow.note.content"])[:200]
    if tagd.get("mlflow.source.name"):
        run.facts["source"] = redact(tagd["mlflow.source.name"])[:200]


def _num(v: Any) -> Any:
    try:
        return int(v) if isinstance(v, str) else v
    except ValueError:
        return None


def _keys(run: tracker.TrackerRun, latest: list[Any]) -> list[str]:
    keys = sorted({str(m.get("key")) for m in latest if isinstance(m, dict) and m.get("key")})
    wanted = [k for k in keys if tracker.tracked(k)]
    if len(wanted) > MAX_KEYS:
        run.missing.append(f"{len(wanted)} tracked metrics; the history of the first {MAX_KEYS} was read")
        wanted = wanted[:MAX_KEYS]
    return wanted


def _history(run: tracker.TrackerRun, key: str, points: list[tuple[float, float | None, Any]]) -> None:
    """Add one metric's (step, timestamp, value) points by step; logged without a step (all at 0), they are numbered in order."""
    points = sorted(points, key=lambda m: (m[0], m[1] or 0))
    unstepped = len(points) > 1 and len({m[0] for m in points}) == 1
    for i, (step, ts, value) in enumerate(points):
        when = datetime.fromtimestamp(ts / 1000, UTC) if ts and 0 < ts < 1e14 else None
        run.add(key, float(i) if unstepped else step, value, when)


def _step(m: dict[str, Any]) -> float:
    return tracker.to_float(_num(m.get("step", 0))) or 0.0
