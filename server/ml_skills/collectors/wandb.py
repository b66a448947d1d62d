"""A W&B run as evidence: from the public API (entity/project/run_id) or a local run directory.

Local `wandb/run-*` and `wandb/offline-run-*` directories are read directly: an offline run
keeps its history, config, summary, system stats and exit code only in its `.wandb` file (a
LevelDB-style log of protobuf records; wandb >= 0.2x ships no reader for it), with the console
in files/output.log. The online API goes through the real wandb client (imported only here),
with its retries bounded and a deadline checked between calls.
"""

from __future__ import annotations

import os
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ml_skills.collectors import tracker
from ml_skills.collectors.gcp import _TooSlow as TooSlow
from ml_skills.collectors.gcp import _within as gcp_within
from ml_skills.collectors.http_api import Deadline, fetch_tail
from ml_skills.errors import (
    InputError,
    MLSkillsError,
    SourceError,
    SourceTimeout,
    SourceUnavailable,
    TargetNotFound,
    UnreadableInput,
)
from ml_skills.models import CollectRequest, Progress, RawEvidence
from ml_skills.safety import paths, untrusted_json
from ml_skills.safety.redact import redact, redact_cut

_RUN_PATH = re.compile(r"^(?P<entity>[\w.-]{1,128})/(?P<project>[\w.-]{1,128})/(?:runs/)?(?P<run>[\w-]{1,128})$")
_HEADER = b":W&B"
_BLOCK = 32 * 1024
MAX_RECORD_BYTES = 256 * 1024 * 1024  # a .wandb file is read up to this many bytes
MAX_ONE_RECORD = 32 * 1024 * 1024  # one record (a history row, a config): wandb's own rows are kilobytes
PAGE_SIZE = 1000
T = TypeVar("T")


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    target = (req.wandb or "").strip()
    path = Path(target).expanduser()
    # on disk: a local run, confined like any path, even when shaped like entity/project/run. Under roots (the server) a
    # local run comes as an absolute path (mcp_tools.common.tracker_target asked the roots): a relative name is a remote
    # run, and the working folder, outside the roots, is never asked (seventy-third round: an existence oracle)
    if (path.is_absolute() or paths.active_roots() is None) and os.path.lexists(path):
        run = _from_dir(_run_dir(paths.contain(path, "any")))
    elif (m := _RUN_PATH.fullmatch(target)) is not None:
        run = _from_api(m["entity"], m["project"], m["run"])
    else:
        raise InputError(
            f"--wandb expects entity/project/run_id or a local wandb/run-* directory; {redact_cut(target, 120)!r} is neither"
        )
    return tracker.to_evidence(run)


# ---------------------------------------------------------------- local run directory


def _inside(p: Path) -> bool:
    try:
        paths.contain(p, "any")
        return True
    except (MLSkillsError, OSError):
        return False


def _run_dir(path: Path) -> Path:
    """The run directory from a run dir, its .wandb file, a `wandb/` dir (latest-run) or the folder holding it."""
    if path.is_file():
        if path.suffix != ".wandb":
            raise InputError(f"{path} is not a W&B run: give the wandb/run-* directory or its .wandb file")
        return path.parent
    for cand in (path, path / "latest-run", path / "wandb" / "latest-run"):
        if not os.path.lexists(cand):
            continue
        real = paths.contain(cand, "any")  # latest-run is a symlink: it must stay inside the roots too
        if real.is_dir() and any(real.glob("*.wandb")):
            return cand  # named as the person knows it; every open below is confined again
    # only names inside the roots: a `wandb` link out of them listed the outside folder's runs (twenty-ninth round)
    runs = sorted(p.name for p in [*path.glob("run-*"), *path.glob("offline-run-*"), *path.glob("wandb/*run-*")] if _inside(p))
    hint = f"; it holds {', '.join(runs[:5])}: pass one of them" if runs else ""
    raise TargetNotFound(f"no W&B run in {path} (no .wandb file){hint}")


def _from_dir(d: Path) -> tracker.TrackerRun:
    # the run's regular .wandb file first: a folder named `x.wandb` beside it made the whole run "a directory" (eighth
    # round); with none, the first name, whose open says why it cannot be read
    named = sorted(d.glob("*.wandb"))
    files = [p for p in named if p.is_file()] or named
    run = tracker.TrackerRun(kind="wandb", name=str(d))
    run.facts["run directory"] = str(d)
    exit_code: int | None = None
    ended = False
    try:
        for rec in _records(files[0]):
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                row = {_key(it): it.value_json for it in rec.history.item}
                step = tracker.to_float(_json(row.get("_step", "null")))
                if step is None:
                    step = float(rec.history.step.num)
                for k, raw in row.items():
                    if not k.startswith("_"):
                        run.add(k, step, _json(raw))
            elif kind == "summary":
                for it in rec.summary.update:
                    run.summary[_key(it)] = _json(it.value_json)
            elif kind == "config":
                _config(run, rec.config.update)
            elif kind == "run":
                r = rec.run
                run.facts["run id"] = r.run_id
                if r.project:
                    run.facts["project"] = f"{r.entity + '/' if r.entity else ''}{r.project}"
                if r.display_name:
                    run.facts["run name"] = r.display_name
                _config(run, r.config.update)
            elif kind == "stats":
                for it in rec.stats.item:
                    run.add("system." + it.key if not it.key.startswith("system") else it.key, 0.0, _json(it.value_json))
            elif kind == "exit":
                exit_code, ended = rec.exit.exit_code, True
    except _Corrupt as e:
        run.missing.append(f"{files[0].name}: {e}; the records before it were read")
    if ended:
        run.state = "finished" if exit_code == 0 else "failed"
        run.facts["exit code"] = str(exit_code)
    else:
        age = time.time() - files[0].stat().st_mtime
        run.state = "running" if age < 300 else "crashed"
        run.facts["last write"] = f"{age:.0f}s ago, no exit record"
    for p in _files_of(d):
        if p.is_file() and not p.is_symlink():
            rel = str(p.relative_to(d / "files"))
            run.artifacts.append(rel)
            if tracker.is_log_name(rel) and len(run.logs) < tracker.MAX_LOGS:
                try:
                    run.logs[rel] = tracker.read_tail(p)
                except InputError as e:
                    run.missing.append(f"files/{rel}: {e}")
    if not run.config and (d / "files" / "config.yaml").is_file():
        run.facts["config"] = "files/config.yaml"
    if not run.summary and (d / "files" / "wandb-summary.json").is_file():
        try:
            with paths.open_binary(d / "files" / "wandb-summary.json") as fh:
                summary = untrusted_json.loads(fh.read(1_000_000).decode("utf-8", errors="replace"))
        except InputError as e:
            run.missing.append(f"files/wandb-summary.json: {e}")
        except ValueError as e:
            run.missing.append(f"files/wandb-summary.json is not valid JSON ({str(e)[:80]})")
        else:
            if isinstance(summary, dict):
                run.summary = summary
            else:
                run.missing.append("files/wandb-summary.json is not a JSON object")
    return run


def _files_of(d: Path) -> list[Path]:
    """The run's files/ tree, walked through held fds and cut at MAX_ARTIFACTS entries."""
    if not (d / "files").is_dir() or (d / "files").is_symlink():
        return []
    out: list[Path] = []
    real = paths.contain(d / "files", "dir")
    for sub, dirnames, filenames in paths.walk(real, max_depth=6):
        dirnames.sort()
        out += [d / "files" / sub.relative_to(real) / n for n in sorted(filenames)]
        if len(out) >= tracker.MAX_ARTIFACTS:
            break
    return sorted(out)[: tracker.MAX_ARTIFACTS]


class _Corrupt(Exception):
    pass


def _records(path: Path) -> Iterator[Any]:
    """Protobuf records of a .wandb file: 7-byte header, 32 KiB blocks, chunks of crc32/len/type."""
    try:
        from wandb.proto import wandb_internal_pb2 as pb
    except ImportError:
        raise InputError("reading a .wandb file needs the wandb package: pip install 'ml-skills[wandb]'") from None
    with paths.open_binary(path) as f:
        if f.read(7)[:4] != _HEADER:
            raise UnreadableInput(f"{path} is not a W&B run log (no ':W&B' header)")
        # a record spanning blocks arrives in pieces: kept in a list and joined once (appending to
        # one bytes object copied it whole per block, quadratic in the record's size)
        pending: list[bytes] = []
        pending_bytes, pos = 0, 7
        block = f.read(_BLOCK - 7)
        while block:
            at = 0
            while at + 7 <= len(block):
                crc, length, typ = struct.unpack_from("<IHB", block, at)
                if typ == 0 and length == 0:  # zero padding at the end of a block
                    break
                body = block[at + 7 : at + 7 + length]
                if len(body) < length:
                    return  # the writer was cut off mid-record (a crash): stop at the last whole record
                if zlib.crc32(body, zlib.crc32(bytes([typ]))) & 0xFFFFFFFF != crc:
                    raise _Corrupt(f"checksum mismatch at byte {pos + at}")
                at += 7 + length
                if typ in (2, 3):  # first and middle chunks of a record spanning blocks
                    if typ == 2:
                        pending, pending_bytes = [], 0
                    pending.append(body)
                    pending_bytes += length
                    if pending_bytes > MAX_ONE_RECORD:
                        raise _Corrupt(f"a record over {MAX_ONE_RECORD // 2**20} MiB at byte {pos + at}: not a W&B record")
                    continue
                if typ not in (1, 4):
                    raise _Corrupt(f"unknown chunk type {typ} at byte {pos + at}")
                chunk = body if typ == 1 else b"".join([*pending, body])
                pending, pending_bytes = [], 0
                rec = pb.Record()  # type: ignore[attr-defined]
                try:
                    rec.ParseFromString(chunk)
                except Exception:  # noqa: BLE001  protobuf's DecodeError; a damaged record ends the readable part
                    raise _Corrupt(f"undecodable record at byte {pos + at}") from None
                yield rec
            pos += len(block)
            if pos >= MAX_RECORD_BYTES:
                raise _Corrupt(f"file over {MAX_RECORD_BYTES // 2**20} MiB, read up to there")
            block = f.read(_BLOCK)


def _key(item: Any) -> str:
    return item.key or ".".join(item.nested_key)


def _json(raw: str) -> Any:
    try:
        return untrusted_json.loads(raw)
    except ValueError:
        return None


def _config(run: tracker.TrackerRun, items: Any) -> None:
    for it in items:
        k = _key(it)
        if not k.startswith("_"):
            v = _json(it.value_json)
            run.config[k] = v.get("value", v) if isinstance(v, dict) and "value" in v else v


# ---------------------------------------------------------------- public API


def client_settings() -> None:
    """Bounded retries for wandb-core's GraphQL client, and no chatter; read when wandb sets itself up."""
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB__GRAPHQL_RETRY_MAX", "3")
    os.environ.setdefault("WANDB__GRAPHQL_RETRY_WAIT_MAX_SECONDS", "4")


# the settings a workspace file may set that choose where the key goes, through what, and with which headers or key
_WORKSPACE_UNTRUSTED = ("base_url", "app_url_override", "api_key", "http_proxy", "https_proxy", "x_extra_http_headers")


def _setup_without_workspace_settings() -> None:
    """Set wandb up with none of the connection settings a workspace settings file gave it.

    wandb reads `wandb/settings` (or `.wandb/settings`) under the working folder when it sets itself up; the server's
    working folder is a run folder, so a settings file planted there chose the host the API key was sent to
    (base_url), and could choose the proxies, extra headers or key (thirty-second round). Those settings are put back
    to what the environment alone gives; the host is also passed to the API explicitly."""
    import wandb
    from wandb.sdk import wandb_setup

    clean = wandb.Settings()
    clean.update_from_env_vars(dict(os.environ))
    settings = wandb_setup.singleton().settings
    for name in _WORKSPACE_UNTRUSTED:
        setattr(settings, name, getattr(clean, name))


def _from_api(entity: str, project: str, run_id: str) -> tracker.TrackerRun:
    client_settings()
    deadline = Deadline(tracker.deadline_s())
    name = f"{entity}/{project}/{run_id}"
    try:
        import wandb
    except ImportError:
        raise InputError("--wandb entity/project/run needs the wandb package: pip install 'ml-skills[wandb]'") from None
    import logging

    logging.getLogger("wandb").setLevel(logging.CRITICAL)
    key = os.environ.get("WANDB_API_KEY")
    per_call = max(1, int(min(30.0, deadline.left())))
    try:
        _setup_without_workspace_settings()
        host = {"base_url": os.environ.get("WANDB_BASE_URL") or wandb.Settings.model_fields["base_url"].default}
        api = wandb.Api(overrides=host, api_key=key, timeout=per_call) if key else wandb.Api(overrides=host, timeout=per_call)
        r = api.run(name)
    except Exception as e:  # noqa: BLE001  the wandb client raises many types; _error names them in one line
        raise _error(e, f"run {name}") from None
    run = tracker.TrackerRun(kind="wandb", name=name)
    run.state = str(r.state)
    run.facts["run url"] = redact(str(getattr(r, "url", "") or ""))
    for attr, label in (("display_name", "run name"), ("created_at", "created"), ("heartbeatAt", "last heartbeat")):
        v = getattr(r, attr, None) if attr != "heartbeatAt" else getattr(r, "_attrs", {}).get("heartbeatAt")
        if v:
            run.facts[label] = str(v)
    run.config = {k: v for k, v in dict(r.config).items() if not k.startswith("_")}
    try:
        run.summary = dict(r.summary._json_dict) if hasattr(r.summary, "_json_dict") else dict(r.summary)
    except Exception as e:  # noqa: BLE001  partial evidence: name what failed and go on
        run.missing.append(f"summary: {_error(e, 'summary')}")
    sysm = r._attrs.get("systemMetrics") if isinstance(getattr(r, "_attrs", None), dict) else None
    sysm = _json(sysm) if isinstance(sysm, str) and sysm.startswith("{") else sysm
    for k, v in (sysm if isinstance(sysm, dict) else {}).items():
        run.add(k if k.startswith("system") else "system." + k, 0.0, v)
    _history(r, run, deadline)
    _files(api, r, run, deadline)
    return run


def _scan(r: Any, deadline: Deadline) -> Iterator[dict[str, Any]]:
    """The run's history rows, the deadline checked before every page the client loads and after every row.

    The client pages by step range up to the run's last step and goes on past empty pages: a server naming a last step
    of 10**12 over empty pages kept it asking, past any deadline, with no row to check it on (twentieth round)."""
    scan = _in_time(lambda: r.scan_history(page_size=PAGE_SIZE, use_cache=False), deadline)
    load = getattr(scan, "_load_next", None)
    if callable(load):

        def bounded() -> None:
            _past(deadline)
            _in_time(load, deadline)

        scan._load_next = bounded
    for row in scan:
        yield row
        _past(deadline)


def _in_time(fn: Callable[[], T], deadline: Deadline) -> T:
    """fn(), waited for no longer than the deadline: wandb-core bounds one attempt by the per-call timeout and retries it, so a
    page dripping within each attempt held the history 35 s past a 6 s deadline (twentieth round). Past it the call is left to
    end in its daemon thread, and its result is never used."""
    try:
        return gcp_within(lambda _timeout: fn(), max(0.1, deadline.left()))
    except TooSlow:
        raise SourceTimeout(f"W&B history: no page within the {deadline.seconds:g}s deadline") from None


def _past(deadline: Deadline) -> None:
    if deadline.left() <= 0:
        raise SourceTimeout(f"W&B history: stopped at the {deadline.seconds:g}s deadline")


def _history(r: Any, run: tracker.TrackerRun, deadline: Deadline) -> None:
    rows = 0
    try:
        deadline.check(f"W&B history of {run.name}")
        for row in _scan(r, deadline):
            rows += 1
            step = tracker.to_float(row.get("_step"))
            for k, v in row.items():
                if not k.startswith("_"):
                    run.add(k, float(rows - 1) if step is None else step, v)
    except SourceError as e:
        run.missing.append(f"history after {rows} rows: {e}")
    except Exception as e:  # noqa: BLE001  partial evidence: name what failed and go on
        run.missing.append(f"history after {rows} rows: {_error(e, 'history')}")
    run.facts["history rows read"] = str(rows)


def _files(api: Any, r: Any, run: tracker.TrackerRun, deadline: Deadline) -> None:
    import httpx

    logs: list[Any] = []
    try:
        for f in r.files(per_page=50):
            if len(run.artifacts) >= tracker.MAX_ARTIFACTS:
                run.missing.append(f"file listing stopped at {tracker.MAX_ARTIFACTS} files")
                break
            run.artifacts.append(str(f.name))
            if tracker.is_log_name(str(f.name)):
                logs.append(f)
    except Exception as e:  # noqa: BLE001  partial evidence: name what failed and go on
        run.missing.append(f"file listing: {_error(e, 'files')}")
    base = str(api.settings.get("base_url", ""))
    for f in logs[: tracker.MAX_LOGS]:
        url = str(getattr(f, "direct_url", None) or getattr(f, "url", "") or "")
        if not url:
            continue
        # the API key goes only to the W&B server itself, never to a storage host's signed URL
        auth = ("api", api.api_key) if api.api_key and _same_origin(url, base) else None
        try:
            with httpx.Client(auth=auth, follow_redirects=True) as client:
                data, cut = fetch_tail(
                    client, url, name="W&B", what=f"file {f.name}", deadline=deadline, max_bytes=tracker.MAX_LOG_BYTES
                )
            run.logs[str(f.name)] = (data.decode("utf-8", errors="replace"), cut)
        except SourceError as e:
            run.missing.append(f"log {f.name}: {e}")


def _same_origin(url: str, base: str) -> bool:
    """Whether a file's URL is on the W&B server itself: its scheme, host and port, with no user in it.

    A prefix test sent the key to `http://api.wandb.ai@elsewhere/...` and to `https://api.wandb.ai.elsewhere/...`
    (twentieth round)."""
    import httpx

    try:
        u, b = httpx.URL(url), httpx.URL(base)
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    return not u.userinfo and bool(b.host) and (u.scheme, u.host, u.port) == (b.scheme, b.host, b.port)


# a 401/403 named in the client's text, never the digits of a port or id (127.0.0.1:40341 is no 403)
_AUTH_CODE = re.compile(r"(?<![\w:./-])40[13](?![\w.])")


def _error(e: BaseException, what: str) -> MLSkillsError:
    """One line from whatever the wandb client raised, with the HTTP status when it has one."""
    text = redact_cut(" ".join(str(e).split()), 240)
    status = _status(e)
    low = text.lower()
    if status in (401, 403) or _AUTH_CODE.search(low) or "unauthorized" in low or "permission" in low or "api key" in low:
        return SourceUnavailable(f"W&B refused {what}: {text}; check WANDB_API_KEY and that it may read this project")
    if status == 404 or "could not find run" in low or "not found" in low:
        return TargetNotFound(
            f"W&B has no {what}: check entity/project/run_id (the run id is the 8-character id in the run's URL)"
        )
    if "refused" in low or "no such host" in low or "dial tcp" in low:
        reason = "connection refused" if "refused" in low else "host unreachable"
        return SourceUnavailable(
            f"cannot reach W&B for {what}: {reason} (after the client's retries); check WANDB_BASE_URL and the network"
        )
    if (
        "invalid character" in low
        or "looking for beginning" in low
        or "cannot unmarshal" in low
        or "unexpected end of json" in low
    ):
        return SourceUnavailable(f"W&B sent a malformed answer for {what} (not the JSON the API returns): {text[:120]}")
    if "timed out" in low or "timeout" in low or "deadline" in low or "in time" in low:  # wandb-core: "did not respond in time"
        return SourceTimeout(f"W&B did not answer {what} in time: {text}")
    if status == 429:
        return SourceUnavailable(f"W&B kept rate-limiting {what} (HTTP 429): try again later")
    code = f"HTTP {status}: " if status else ""
    return SourceUnavailable(f"W&B failed on {what}: {code}{text or type(e).__name__}")


def _status(e: BaseException) -> int | None:
    for err in (e, getattr(e, "exc", None), e.__cause__, e.__context__):
        resp = getattr(err, "response", None)
        for attr in ("http_status", "status_code"):
            v = getattr(resp, attr, None)
            if isinstance(v, int) and v:
                return v
    return None
