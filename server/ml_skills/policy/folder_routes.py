"""The files of a run folder that can send the run's credentials elsewhere when it restarts: W&B's settings file and a
`.env` that python-dotenv loads. They are read here without following links, so the question can name where they point.
"""

from __future__ import annotations

import configparser
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from ml_skills.errors import PolicyError
from ml_skills.policy.quoting import quoted
from ml_skills.policy.restart_env import sends_elsewhere

MAX_SETTINGS_BYTES = 64 * 1024


def read_in_folder(dfd: int, parts: tuple[str, ...]) -> bytes | str | None:
    """A small file of the run folder (held `dfd`) read with no link followed: its bytes; a note (a string) when a part is a
    link, not a plain file, over MAX_SETTINGS_BYTES or unreadable (the library reads it anyway); None when it is missing."""
    shown = "/".join(parts)
    fds = [dfd]
    try:
        for part in parts[:-1]:
            try:
                fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
            except FileNotFoundError:
                return None
            except OSError:
                return f"({part} is a link or not a folder: it is read wherever it leads)"
        try:
            st = os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return f"({shown} is a link or not a plain file: it is read wherever it leads)"
        if st.st_size > MAX_SETTINGS_BYTES:  # seventeenth round: a base_url past the first 64 KiB was never seen
            return f"({shown} is {st.st_size} bytes, too large to read here)"
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fds[-1])
        try:
            return os.read(fd, MAX_SETTINGS_BYTES + 1)
        finally:
            os.close(fd)
    except OSError:
        return f"({shown} cannot be read here)"
    finally:
        for fd in fds[1:]:
            os.close(fd)


def wandb_settings_route(dfd: int) -> str | None:
    """What a run folder's W&B settings file tells W&B about its server: `wandb.init` reads the settings file of the working
    directory, the folder a restart starts in, and sends the W&B key to its `base_url` (sixteenth round: a planted one sent
    it to another host, while the question named only the variables of the command). W&B reads `.wandb/settings` when a
    `.wandb` folder exists, else `wandb/settings` (seventeenth round: only the second was read here). The `base_url` it sets; a
    note when a part is a link, too large or cannot be read (W&B follows links and reads it whole; nothing of that is done
    here); None when there is no such setting."""
    dot = os.path.lexists(f"/proc/self/fd/{dfd}/.wandb")
    raw = read_in_folder(dfd, (".wandb" if dot else "wandb", "settings"))
    if raw is None or isinstance(raw, str):
        return raw
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(raw.decode("utf-8", errors="replace"))
    except configparser.Error:
        return f"({'.wandb' if dot else 'wandb'}/settings cannot be parsed here)"
    url = parser.get("default", "base_url", fallback=None)
    return None if url is None or url.strip().rstrip("/") == "https://api.wandb.ai" else url


# A key as python-dotenv reads it: after an optional `export`, bare or in single quotes (`'WANDB_BASE_URL'=...`)
_DOTENV_NAME = re.compile(r"^[ \t]*(?:export[ \t]+)?'?([^=#\s']+)'?[ \t]*=", re.MULTILINE)


def dotenv_routes(dfd: int) -> str | None:
    """What the run folder's `.env` sets that sends the run's credentials elsewhere (seventeenth round: a script that calls
    python-dotenv's `load_dotenv()` reads the `.env` beside it, and `WANDB_BASE_URL` there sent the W&B key to another host
    while the question named nothing): the names, or a note as `read_in_folder` gives it; None when it sets none."""
    raw = read_in_folder(dfd, (".env",))
    if raw is None or isinstance(raw, str):
        return raw
    names = sends_elsewhere(_DOTENV_NAME.findall(raw.decode("utf-8", errors="replace")))
    return ", ".join(names) if names else None


def folder_routes(dfd: int) -> list[str]:
    """The "Expected impact" clauses for the files of the run folder that can send the run's credentials elsewhere: W&B's
    settings file and a `.env` (see wandb_settings_route, dotenv_routes)."""
    out = []
    if url := wandb_settings_route(dfd):
        name = ".wandb/settings" if os.path.lexists(f"/proc/self/fd/{dfd}/.wandb") else "wandb/settings"
        out.append(url.strip("()") + ", so a run that logs to W&B may send its W&B key elsewhere" if url.startswith("(")
                   else f"the folder's {name} sets the W&B server to {quoted(url, 200)}, so a run that logs to W&B sends its W&B key there")
    if env := dotenv_routes(dfd):
        out.append(env.strip("()") + ", and a script that loads it with python-dotenv may send its credentials elsewhere"
                   if env.startswith("(") else f"the folder's .env sets {env}, so a script that loads it with python-dotenv sends "
                   "its credentials (W&B key, Hugging Face token, ...) where they point")
    return out


# The files a version manager's shim reads to pick the interpreter it runs, in the folder it starts in or any folder above:
# pyenv's .python-version, asdf's .tool-versions, mise's own (fifty-sixth round: a `python` on PATH that was pyenv's shim ran
# Python 2.7.18 chosen by a planted .python-version, while the question showed `python train.py`).
_VERSION_FILES = (".python-version", ".tool-versions", ".mise.toml", "mise.toml", ".rtx.toml")


def _version_files(folder: Path, roots: Sequence[Path]) -> list[tuple[Path, str]]:
    """Each version file in `folder` or above it inside the roots, nearest first, with what it says: read with no link
    followed (fifty-ninth round: a `.python-version` linked to a file outside the roots was quoted in the question)."""
    out = []
    for where in [folder, *folder.parents]:
        if not any(where == r or r in where.parents for r in roots):
            break
        for name in _VERSION_FILES:
            path = where / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            except OSError:
                out.append((path, "(a link or unreadable: not read here)"))
                continue
            try:
                said = (os.read(fd, 200).decode("utf-8", errors="replace").strip() if stat.S_ISREG(os.fstat(fd).st_mode)
                        else "(not a plain file: not read here)")
            except OSError:
                said = "(cannot be read here)"
            finally:
                os.close(fd)
            out.append((path, said))
    return out


def _is_shim(program: str) -> bool:
    return Path(program).parent.name == "shims"


def version_file_routes(folder: Path, program: str, roots: Sequence[Path]) -> list[str]:
    """The "Expected impact" clauses for version files that pick which interpreter a shim runs: when the launcher found on
    the server's PATH is a version manager's shim (a file in a `shims` folder), each such file in the run folder or above it
    inside the allowed roots, with what it says (nothing outside the roots is read), and the version the start is pinned to
    (shim_pin). Empty when the launcher is a real program."""
    if not _is_shim(program):
        return []
    found = _version_files(folder, roots)
    pin = _pin(program, found)
    shim = f"{quoted(Path(program).name)} on the server's PATH is pyenv's shim"
    if os.environ.get("PYENV_VERSION"):  # the server's own pin, inherited: no version file picks anything
        return [f"{shim}, pinned by the server's own PYENV_VERSION={quoted(pin['PYENV_VERSION'], 60)}"]
    pinned = (f"{shim}, started with PYENV_VERSION={quoted(pin['PYENV_VERSION'], 60)}, the interpreter it runs whatever a "
              "version file says when it starts, which may not be the server's own")
    return [f"{shim}, and {quoted(str(path))} says {quoted(said, 120)}" for path, said in found] + [pinned]


def shim_pin(folder: Path, program: str, roots: Sequence[Path]) -> dict[str, str]:
    """The variable that pins pyenv's shim to the version the question shows: the nearest version file's first word, or
    the server's own version when there is none. The shim reads `.python-version` when it starts, after every check here:
    fifty-ninth round, one written in that gap ran Python 2.7.18 (6 of 6 tries). Another manager's shim (asdf, mise) is
    refused: its files are not read here the way it reads them."""
    return _pin(program, _version_files(folder, roots)) if _is_shim(program) else {}


def _pin(program: str, found: list[tuple[Path, str]]) -> dict[str, str]:
    """shim_pin from the version files already read (`_version_files`)."""
    if ".pyenv" not in Path(program).parts and "pyenv" not in Path(program).parent.parent.name:
        raise PolicyError(f"{quoted(program)} is a version manager's shim other than pyenv's, which picks the interpreter from "
                          "files it reads when it starts: record the interpreter by its real path, or start the server with "
                          "the real interpreter first on PATH")
    if os.environ.get("PYENV_VERSION"):
        return {"PYENV_VERSION": os.environ["PYENV_VERSION"]}  # the server's own pin, which the child inherits anyway
    nearest = next((said.split()[0] for path, said in found
                    if path.name == ".python-version" and said and not said.startswith("(")), None)
    if nearest is None:
        own = Path(sys.executable).parts
        nearest = own[own.index("versions") + 1] if "versions" in own[:-2] else "system"
    if nearest != "system" and not (_VERSION_NAME.match(nearest) and _installed(program, nearest)):
        # sixty-third round: pyenv refuses a version file's word holding `/` or `..` (CVE-2022-35861), not the variable;
        # pinned as read, `../../run/env` ran the run folder's env/bin/python, shown cut to what looked like `3.11.7`
        raise PolicyError(f"the run folder's .python-version names {quoted(nearest, 60)}, which is not an interpreter pyenv has "
                          "installed by that plain name: the shim would run whatever it names; record the interpreter by its "
                          "real path, or fix the version file")
    return {"PYENV_VERSION": nearest}


_VERSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\-]{0,59}$")


def _installed(program: str, name: str) -> bool:
    """Whether pyenv (the root its shim `program` sits in, or PYENV_ROOT) has the interpreter `name` installed: a folder
    `versions/NAME` (pyenv-virtualenv's environments are links there; pyenv's root is not the run folder's to write)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path(program).parent.parent)
    return (root / "versions" / name).is_dir()
