"""TensorBoard event files as evidence: the scalar series a run wrote (loss, validation loss, lr, grad norm).

A run directory's `events.out.tfevents.*` files (add_scalars' child directories included) or one
such file. The files are opened through safety/paths like every path target (confined, a FIFO
refused, nothing written) and split by their TFRecord framing here: u64 length, masked crc32c of
the length, the record, masked crc32c of the record. So damage is found exactly: a file cut
mid-record (a killed writer, a partial copy) or a bad checksum keeps the records before it and
names the rest in `missing`. Each record is decoded with tensorboard's own `Event` protobuf
(the `tensorboard` package, imported here only). The scalars go through the tracker shape
(collectors/tracker.py), as W&B and MLflow histories do, so the same detectors run on them.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ml_skills.collectors import tracker
from ml_skills.errors import InputError, MLSkillsError, TargetNotFound
from ml_skills.models import CollectRequest, Progress, RawEvidence, canonical
from ml_skills.safety import paths

MARK = "tfevents"
MAX_FILES = 32  # event files read from one run
MAX_FILE_BYTES = 512 * 1024 * 1024  # read from one file; the rest is named in missing
MAX_RECORD = 32 * 1024 * 1024  # one event: a scalar is tens of bytes, an image a few MiB
MAX_DEPTH = 4  # directories below the one given, looking for event files
_VAL = {"val", "valid", "validation", "eval", "evaluation", "test", "dev"}
_TRAIN = {"train", "training"}


class Damaged(Exception):
    """Where a file stops being readable; the records before it stand."""


def collect(req: CollectRequest, progress: Progress | None = None) -> RawEvidence:
    """The COLLECTORS entry for --tensorboard DIR_OR_FILE: the scalars as raw evidence; the engine reads them."""
    value = (req.tensorboard or "").strip()
    if not value:
        raise InputError("--tensorboard expects a run directory of events.out.tfevents.* files, or one such file")
    given = Path(value).expanduser()
    real = paths.contain(given, "any")
    run = tracker.TrackerRun(kind="tensorboard", name=str(given))
    files, notes = event_files(real)
    run.missing.extend(notes)
    run.facts["event files"] = str(len(files))
    tags: set[str] = set()
    for f in files:
        try:
            tags |= read_scalars(f, run, real if real.is_dir() else f.parent)
        except MLSkillsError as e:  # one unreadable file (refused, vanished) leaves the others' evidence
            run.missing.append(f"{f.name}: {e}")
    if tags:
        run.facts["scalar tags"] = ", ".join(sorted(tags)[:12]) + (" ..." if len(tags) > 12 else "")
    return tracker.to_evidence(run)


# ---------------------------------------------------------------- which files


def event_files(real: Path) -> tuple[list[Path], list[str]]:
    """The event files of one run, oldest first, and what was left out.

    A directory holding event files is a run; its subdirectories (add_scalars writes one per
    series) belong to it. A directory of several runs (runs/exp1, runs/exp2) is read for its
    newest run only, and the others are named: mixing two runs' steps would invent a trajectory.
    """
    if real.is_file():
        if MARK not in real.name:
            raise InputError(f"{real} is not a TensorBoard event file: give a run directory or an events.out.tfevents.* file")
        return [real], []
    found: list[Path] = []
    notes: list[str] = []
    for d, _dirs, names in paths.walk(real, max_depth=MAX_DEPTH):
        for n in sorted(names):
            if MARK not in n:
                continue
            try:
                found.append(paths.contain(d / n, "file"))
            except MLSkillsError as e:
                notes.append(f"{n} skipped: {e}")
    if not found:
        raise TargetNotFound(f"no TensorBoard event files (events.out.tfevents.*) in {real} or {MAX_DEPTH} levels below it")
    runs = _runs(found)
    newest = max(runs, key=lambda r: max(f.stat().st_mtime for f in runs[r]))
    if len(runs) > 1:
        others = sorted(str(r.relative_to(real)) for r in runs if r != newest)
        notes.append(f"{len(runs)} runs under {real}: read the newest, {newest.relative_to(real) or '.'}; pass another run's "
                     f"directory to read it: {', '.join(others[:8])}{' ...' if len(others) > 8 else ''}")
    files = sorted(runs[newest], key=lambda f: (f.parent != newest, str(f)))
    if len(files) > MAX_FILES:
        notes.append(f"{len(files)} event files in {newest}: the first {MAX_FILES} were read")
        files = files[:MAX_FILES]
    return files, notes


def _runs(found: list[Path]) -> dict[Path, list[Path]]:
    """Event files grouped by run: the topmost directory holding event files above each."""
    dirs = {f.parent for f in found}
    runs: dict[Path, list[Path]] = {}
    for f in found:
        top = next((p for p in reversed(f.parents) if p in dirs), f.parent)
        runs.setdefault(top, []).append(f)
    return runs


# ---------------------------------------------------------------- one file


def read_scalars(path: Path, run: tracker.TrackerRun, run_dir: Path) -> set[str]:
    """Every scalar of one event file into `run`; the tags read. Damage is a `missing` note, never an exception."""
    prefix = _series_prefix(path, run_dir)
    tags: set[str] = set()
    n = 0
    try:
        for event in records(path):
            n += 1
            when = _when(event.wall_time)
            for v in event.summary.value:
                x = _scalar(v)
                if x is None:
                    continue
                tag = prefix(v.tag)
                if len(tags) < tracker.MAX_KEYS:
                    tags.add(tag)
                run.add(fold(tag), float(event.step), x, when)
    except Damaged as e:
        run.missing.append(f"{path.name}: {e}; the {n} records before it were read")
    return tags


def records(path: Path) -> Iterator[Any]:
    """The `Event`s of one file, checked record by record; raises Damaged where the file stops being readable."""
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        raise InputError("reading TensorBoard event files needs the tensorboard package: pip install 'ml-skills[tensorboard]'") from None
    with paths.open_binary(path) as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while True:
            if pos >= MAX_FILE_BYTES:
                raise Damaged(f"file of {size} bytes read up to {MAX_FILE_BYTES // 2**20} MiB")
            head = f.read(12)
            if not head:
                return
            if len(head) < 12:
                raise Damaged(f"cut off at byte {pos} inside a record header (a writer killed mid-record, or a partial copy)")
            length, length_crc = struct.unpack("<QI", head)
            if _masked_crc(head[:8]) != length_crc:
                raise Damaged(f"checksum mismatch in the record header at byte {pos}: not an event record")
            if length > MAX_RECORD:
                raise Damaged(f"a record of {length} bytes at byte {pos}, over {MAX_RECORD // 2**20} MiB")
            body = f.read(length)
            tail = f.read(4)
            if len(body) < length or len(tail) < 4:
                raise Damaged(f"cut off at byte {pos + 12 + len(body)} inside a record (a writer killed mid-record, or a partial copy)")
            if _masked_crc(body) != struct.unpack("<I", tail)[0]:
                raise Damaged(f"checksum mismatch in the record at byte {pos}")
            event = event_pb2.Event()
            try:
                event.ParseFromString(body)
            except Exception:  # noqa: BLE001  protobuf's DecodeError: the record is not an Event
                raise Damaged(f"undecodable record at byte {pos}") from None
            yield event
            pos += 16 + length


def _when(wall_time: float) -> datetime | None:
    """An event's time, or None when the writer's clock is not a time `datetime` can hold (SummaryWriter takes any
    walltime: 1e20 or inf raised OverflowError out of the collector, and the diagnosis ended 'internal error')."""
    if not wall_time > 0:
        return None
    try:
        return datetime.fromtimestamp(wall_time, UTC)
    except (OverflowError, ValueError, OSError):
        return None


def _scalar(v: Any) -> float | None:
    """A summary value's number: simple_value (torch, tf1) or a scalar float tensor (tf2's tf.summary.scalar)."""
    kind = v.WhichOneof("value")
    if kind == "simple_value":
        return float(v.simple_value)
    if kind != "tensor" or v.tensor.tensor_shape.dim:
        return None
    t = v.tensor
    if t.float_val:
        return float(t.float_val[0])
    if t.double_val:
        return float(t.double_val[0])
    fmt = {1: "<f", 2: "<d"}.get(t.dtype)  # DT_FLOAT, DT_DOUBLE
    if fmt and len(t.tensor_content) == struct.calcsize(fmt):
        return float(struct.unpack(fmt, t.tensor_content)[0])
    return None


def _series_prefix(path: Path, run_dir: Path) -> Any:
    """add_scalars('Loss', {'train': ..}) writes tag 'Loss' into a child directory 'Loss_train': read as 'Loss/train'."""
    child = path.parent.name if path.parent != run_dir else None

    def tag_of(tag: str) -> str:
        stem = tag.replace("/", "_") + "_"
        if child and child.startswith(stem) and len(child) > len(stem):
            return f"{tag}/{child[len(stem):]}"
        return tag

    return tag_of


def fold(tag: str) -> str:
    """A TensorBoard tag as the detectors name it: 'Loss/train' -> loss, 'Loss/val' -> val_loss; else as written."""
    parts = [p for p in tag.replace("\\", "/").split("/") if p]
    if canonical(tag) is not None and (len(parts) < 2 or parts[-1].lower() not in _VAL | _TRAIN):
        return tag  # a name the detectors know as written ('val/loss', 'train/grad_norm'), not a metric/split tag
    if len(parts) < 2:
        return tag
    for split, rest in ((parts[-1].lower(), parts[:-1]), (parts[0].lower(), parts[1:])):
        c = canonical("_".join(rest))
        if c is None or split not in _VAL | _TRAIN:
            continue
        name = c if split in _TRAIN else (c if c.startswith("val_") else f"val_{c}")
        if canonical(name) is not None:
            return name
    return tag


def _crc32c_fn() -> Any:
    try:
        import google_crc32c  # a C extension when installed (google-cloud's dependency)

        return google_crc32c.value
    except ImportError:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import crc32c  # pure Python: about 4 MB/s

        return crc32c


_crc32c: Any = None


def _masked_crc(data: bytes) -> int:
    global _crc32c
    if _crc32c is None:
        _crc32c = _crc32c_fn()
    x = _crc32c(data) & 0xFFFFFFFF
    return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF

