"""The results archive: has this exact command been run before?
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

from ml_skills.checks.report import Check, Verdict
from ml_skills.errors import InputError
from ml_skills.safety import paths


def config_fingerprint(script: Path, args: list[str]) -> str:
    return hashlib.sha256((script.name + "\0" + " ".join(args)).encode()).hexdigest()[:16]


def archive_check(archive: Path | None, script: Path, args: list[str]) -> Check:
    if archive is None:
        return Check(name="results archive", verdict=Verdict.SKIP, detail="no --results-archive given")
    if not archive.is_dir():
        return Check(name="results archive", verdict=Verdict.FAIL, detail=f"no archive at {archive}", fix="point at the results archive")
    wanted = " ".join(args)
    found = (Path(d) / "command.txt" for d, _dirs, names in paths.walk(archive) if "command.txt" in names)  # bounded depth, held fds
    for cmd_file in itertools.islice(found, 10_000):
        try:
            recorded = paths.read_capped(cmd_file, 64 * 1024).decode("utf-8", errors="replace")
        except (OSError, InputError):
            continue
        if script.name in recorded and wanted and wanted in recorded:
            return Check(name="results archive", verdict=Verdict.FAIL, detail=f"already run: {cmd_file.parent} has the same command",
                         fix="read that result first; re-run only on purpose")
    return Check(name="results archive", verdict=Verdict.PASS, detail=f"no earlier run with this command in {archive}")
