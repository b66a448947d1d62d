"""The data directory: is it complete (no producer still writing, the expected shards, the marker), and does an
image dataset fit in memory once decoded?
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

from ml_skills.checks.report import Check, Verdict
from ml_skills.errors import MLSkillsError, PathNotAllowed
from ml_skills.safety import paths

TEMP_NAMES = re.compile(r"(?i)(\.tmp$|\.partial$|\.incomplete$|\.part$|~$|^\.)")
IMAGE_EXT = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")


def _plain_files(data: Path) -> tuple[list[Path], int]:
    """The dataset's files, and how many symlinks were not followed: a link is followed only to a file inside the
    allowed roots (safety/paths.contain). Following every link made the shard count, the fresh and the empty files
    an oracle on any file of the machine (`shard-9.bin -> /home/x/.ssh/id_rsa`: counted when it exists)."""
    files: list[Path] = []
    unfollowed = 0
    for p in paths.below(data):
        if p.is_symlink():
            try:
                real = paths.contain(p, "any")
            except MLSkillsError:
                unfollowed += 1
                continue
            if real.is_file():
                files.append(p)  # under its own name
        elif p.is_file():
            files.append(p)
    return files, unfollowed


def completeness_check(data: Path, expect_shards: int | None, marker: str | None, pattern: str, quiet_seconds: float) -> Check:
    if not data.is_dir():
        return Check(name="input completeness", verdict=Verdict.FAIL, detail=f"no data directory at {data}", fix="point --data at the dataset")
    files, unfollowed = _plain_files(data)
    shards = [p for p in files if p.match(pattern) and not TEMP_NAMES.search(p.name)]
    temps = [p.name for p in files if TEMP_NAMES.search(p.name) and p.name != marker]
    now = time.time()
    fresh = [p.name for p in files if now - p.stat().st_mtime < quiet_seconds]
    problems = []
    if temps:
        problems.append(f"temporary files present ({', '.join(sorted(temps)[:3])}): a producer is still writing")
    if fresh:
        problems.append(f"{len(fresh)} file(s) modified in the last {quiet_seconds:g}s ({', '.join(sorted(fresh)[:3])})")
    if expect_shards is not None and len(shards) != expect_shards:
        problems.append(f"{len(shards)} shard(s) matching {pattern!r}, expected {expect_shards}")
    if marker:
        try:  # looked up below `data` through held fds, no link followed: never a probe of files elsewhere
            present = paths.exists_below(data, marker)
        except PathNotAllowed:
            problems.append(f"completion marker {marker!r} refused: give a name inside the data directory "
                            "(relative, no '..'); it was not looked up")
        else:
            if not present:
                problems.append(f"completion marker {marker} is missing")
    empty = [p.name for p in shards if p.stat().st_size == 0]
    if empty:
        problems.append(f"empty shard(s): {', '.join(empty[:3])}")
    if unfollowed:  # one count for dangling links and links out of the roots: the answer says nothing of files elsewhere
        problems.append(f"{unfollowed} symlink(s) in the data directory were not followed (dangling, or out of the allowed "
                        "roots): copy the files in, or allow their directory")
    if problems:
        return Check(name="input completeness", verdict=Verdict.FAIL, detail="; ".join(problems),
                     fix="wait for the producer to finish (completion marker written last), then start; assert the shard count in the trainer too")
    return Check(name="input completeness", verdict=Verdict.PASS, detail=f"{len(shards)} shard(s), stable for {quiet_seconds:g}s" + (f", marker {marker}" if marker else ""))


IMAGE_HEAD_BYTES = 1024 * 1024
"""Pillow reads an image's size from its first bytes (JPEG's and PNG's within a few KiB, past EXIF blocks of up to 64 KiB
each) but reads every TIFF tag's data eagerly, whatever length the tag claims: a 4 KB sparse TIFF whose tag spans its
100 MB took 1.1 GB (twenty-ninth round). Only this much of each file is handed to it: a TIFF whose directory lies beyond
it is left unsized."""


def memory_check(data: Path, bytes_per_value: int, limit: int | None) -> tuple[Check, dict[str, str]]:
    """Decoded size of an image dataset (from headers, without decoding) against the memory limit."""
    try:
        from PIL import Image
    except ImportError:
        return Check(name="memory budget", verdict=Verdict.SKIP, detail="Pillow not installed"), {}
    total = 0
    count = 0
    for p in paths.below(data):
        if p.suffix.lower() in IMAGE_EXT and p.is_file():
            try:
                with paths.open_binary(p) as fh:
                    head = fh.read(IMAGE_HEAD_BYTES)
                with Image.open(io.BytesIO(head)) as im:
                    total += im.width * im.height * len(im.getbands()) * bytes_per_value
                    count += 1
            except Exception:  # noqa: BLE001, S112 - a corrupt image is the data check's business
                continue
    if count == 0:
        return Check(name="memory budget", verdict=Verdict.SKIP, detail="no images to size"), {}
    if limit is None:
        import psutil

        limit = psutil.virtual_memory().available
    facts = {"decoded_dataset_bytes": str(total), "memory_limit_bytes": str(limit)}
    detail = f"{count} images decode to {total / 2**30:.2f} GiB; memory limit {limit / 2**30:.2f} GiB"
    if total > 0.8 * limit:
        return Check(name="memory budget", verdict=Verdict.FAIL, detail=detail + ": loading them eagerly will be OOM-killed (exit 137)",
                     fix="decode lazily per batch in Dataset.__getitem__ (or memory-map), never the whole set up front"), facts
    return Check(name="memory budget", verdict=Verdict.PASS, detail=detail), facts
