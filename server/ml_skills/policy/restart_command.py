"""Reading and checking a recorded restart command: the one line a launcher wrote (`command.txt`, `cmd.txt`, `command`),
refused unless it is a training launch shown to the person exactly as it runs.

Kept apart from `policy/actions.py` because these checks grew round by round (issue 14) into most of that module; the
variables a recorded line may not set live in `policy/restart_env.py`. `_recorded_command` is the entry point:
`policy/actions._prepare_restart` calls it when the action is prepared and again just before the process starts.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import sys
from pathlib import Path
from typing import NamedTuple

from ml_skills.errors import InputError, PolicyError
from ml_skills.policy import launcher_stages
from ml_skills.policy.launcher_options import env_value_refusal, read_launcher
from ml_skills.policy.quoting import decoded, looks_like_another, quoted
from ml_skills.policy.restart_env import picks_the_program
from ml_skills.safety.invisible import hidden_characters
from ml_skills.safety.programs import find_program
from ml_skills.safety.redact import _FILL, READ_AS, redact, settled

# Files launchers write to record the command a run was started with. Scripts (launch.sh,
# train.sh) are programs a person wrote, not records, so they are never run from here.
RECORDED_COMMAND_FILES = ("command.txt", "cmd.txt", "command")
_LAUNCHER = re.compile(r"^(python(\d+(\.\d+)?)?|torchrun|deepspeed|accelerate|srun|mpirun|horovodrun)$")
# Launchers not restarted, and why. srun, mpirun and horovodrun (forty-fifth round) start any program, on other hosts, through
# a scheduler or an MPI runtime: their options, variables and configuration files (Open MPI's MCA files, SLURM's, hydra's
# proxies) choose which programs start and what they load, and the forty-second to forty-fourth rounds each passed their
# allow-lists. accelerate (sixtieth round, after round 59 passed its config reading again): its config file's keys become
# options and choose the libraries it loads by name (DeepSpeed, Megatron, FP8 and dynamo backends, a hub kernel for sequence
# parallelism); the forty-second, forty-fourth, fifty-second and fifty-ninth rounds each found a key the allow-list missed.
_SCHEDULED = ("starts programs through a scheduler or an MPI runtime, whose options, variables and configuration files choose "
              "which programs start and what they load; resubmit the job through its scheduler, or run the line yourself")
_NOT_RESTARTED = {"deepspeed": ("starts its per-node launcher as `python -m deepspeed.launcher.launch` in the run folder, first on "
                               "that process's import path, and it imports about a hundred modules (hjson, yaml, numpy, ...) "
                               "before the run's script: one planted in the folder runs as the launcher (forty-third round); "
                               "record the launch as torchrun, or run it yourself"),
                  "srun": _SCHEDULED, "mpirun": _SCHEDULED, "horovodrun": _SCHEDULED,
                  "accelerate": ("reads a config file and options whose keys choose the libraries it loads by name (DeepSpeed, "
                                 "Megatron, FP8 and dynamo backends, hub kernels); ml-skills restarts only python and torchrun: "
                                 "run the line yourself, or record the launch as torchrun")}
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}=")


# `python -X pycache_prefix=DIR` is PYTHONPYCACHEPREFIX given as an option (also bundled: `-EXpycache_prefix=DIR`).
_PYCACHE_OPTION = re.compile(r"pycache_prefix", re.IGNORECASE)
# argparse takes any unambiguous prefix of a long option: torchrun reads --no-py (even --no-) as --no-python
_NO_PYTHON = ("--no-python", "--no_python")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox", "env", "exec", "xargs", "perl", "ruby", "node"}
MAX_COMMAND_FILE = 64 * 1024
MAX_SHOWN_COMMAND = 2000  # characters of a recorded command the question shows; a longer one is refused, never cut


class Recorded(NamedTuple):
    line: str
    env: dict[str, str]
    argv: list[str]
    program: str  # the launcher's file as checked (absolute, no link): what is started, whatever argv[0] names by then


def _recorded_command(f: Path, dfd: int) -> Recorded:
    """The recorded line, its environment assignments, argv and the checked launcher of a launcher's command
    file, read through `dfd` (its folder, held: see prepared.held_dir), or a clear refusal."""
    if f.name not in RECORDED_COMMAND_FILES:
        raise PolicyError(f"{quoted(str(f))} is not a recorded launch command: restart-unchanged runs only a command a launcher "
                          f"recorded ({', '.join(RECORDED_COMMAND_FILES)}), never an arbitrary file or a script")
    try:
        fd = os.open(f.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as e:
        raise PolicyError(f"{quoted(str(f))} cannot be opened as a plain file ({e.strerror or e}): nothing was started") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PolicyError(f"{quoted(str(f))} is not a regular file")
        if st.st_size > MAX_COMMAND_FILE:
            raise InputError(f"{quoted(str(f))} is {st.st_size} bytes: a recorded command is one line")
        raw = os.read(fd, MAX_COMMAND_FILE + 1)
    finally:
        os.close(fd)
    if b"\x00" in raw:
        raise InputError(f"{quoted(str(f))} holds binary data, not a recorded command")
    lines = [ln.strip() for ln in raw.decode("utf-8", errors="replace").splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if len(lines) != 1:
        raise InputError(f"{quoted(str(f))} holds {len(lines)} command lines; restart-unchanged runs exactly one recorded command")
    try:
        words = shlex.split(lines[0])
    except ValueError as e:
        raise InputError(f"{quoted(str(f))}: the command cannot be split into arguments ({e})") from None
    env: dict[str, str] = {}
    while words and _ENV_ASSIGN.match(words[0]):
        k, _, v = words.pop(0).partition("=")
        env[k] = v
    if not words or not _LAUNCHER.match(Path(words[0]).name):
        raise PolicyError(f"{quoted(str(f))} does not record a training launch (python, torchrun): "
                          f"{quoted(redact(lines[0]), 200)} is not restarted")
    if (name := Path(words[0]).name) in _NOT_RESTARTED:
        raise _not_a_launch(f, lines[0], f"{name} {_NOT_RESTARTED[name]}")
    _shown_as_it_runs(f, lines[0])
    _only_a_training_launch(f, lines[0], env, words, dfd)
    word, program = _launcher_program(f, words[0], dfd)
    return Recorded(lines[0], env, [word, *words[1:]], program)


# What a redaction may hide in a recorded line: a secret's value (a token, a key, a password), never code or words.
_VALUE_CHARS = re.compile(r"[A-Za-z0-9_\-.+/=:@%~]+")


def _shown_as_it_runs(f: Path, line: str) -> None:
    """Refuse a line the question cannot show as it runs: the question strips invisible characters and
    escapes (`python tra<ZWSP>in.py` read as `python train.py`, another file), and masks secrets (a mask
    over `token=os.system('...')` hides code, not a value). What is shown must be what runs, or at most a
    secret's value hidden."""
    if hidden_characters(line) or any(not c.isprintable() for c in line):
        raise _not_a_launch(f, line, "it holds invisible characters, escapes or controls, which the question cannot show: the "
                                     "command shown would not be the command that runs")
    if decoded(line):
        raise _not_a_launch(f, line, "it holds a JSON escape or an HTML character reference (of a letter, digit, one of _-.+/:= or an "
                                     "invisible character) that the question would show decoded or drop: the command read would not "
                                     "be the command that runs")
    if odd := next((c for c in line if looks_like_another(c)), None):
        raise _not_a_launch(f, line, f"it holds U+{ord(odd):04X}, a symbol a reader can take for a space or for punctuation "
                                     "(a blank one makes one word read as two): the command read would not be the command that runs")
    spans = []
    for masked in (line, line.translate(READ_AS)):  # as written, and as read (redact masks both: `--ｔｏｋｅｎ=X`)
        masked, _n = settled(masked, fill=True)
        spans += [(m.start(), m.end()) for m in re.finditer(_FILL + "+", masked)]
    if any(not _VALUE_CHARS.fullmatch(line[a:b]) for a, b in spans):
        raise _not_a_launch(f, line, "a part the question would show as [REDACTED] is not a plain secret value (it holds spaces, "
                                     "quotes, brackets or operators), so the person could not see what runs")
    if any(not _a_secrets_value(line, a) for a, _ in spans):
        raise _not_a_launch(f, line, "a part the question would show as [REDACTED] is not the value of a secret's variable or "
                                     "option (a folder, a script or a module that reads as a token), so the person could not "
                                     "see what runs")


# the names of a variable or an option whose value is a secret: `HF_TOKEN=`, `--wandb_api_key=`, `--password X`
_SECRET_NAME = re.compile(r"(?i)(?:key|token|secret|passw|pass$|pwd|auth|credential)")
_ASSIGNED = re.compile(r"""^["']?(?:--?)?([A-Za-z_][\w\-.]*)=["']?$""")
_OPTION = re.compile(r"^--?([A-Za-z_][\w\-.]*)$")


def _a_secrets_value(line: str, start: int) -> bool:
    """Whether the masked part starting at `start` is the value of a secret's variable or option, what a mask may hide
    (fiftieth round: `PYTHONPATH=hf_...` and `python hf_....py`, a folder and a script named like a token, were shown as
    [REDACTED], and the folder's sitecustomize.py and the script ran after an accept)."""
    begin = max(line.rfind(" ", 0, start), line.rfind("\t", 0, start)) + 1
    if m := _ASSIGNED.match(line[begin:start]):
        return bool(_SECRET_NAME.search(m.group(1)))
    if line[begin:start].strip("\"'"):
        return False
    before = line[:begin].split()
    option = _OPTION.match(before[-1]) if before else None
    return option is not None and bool(_SECRET_NAME.search(option.group(1)))


def _not_a_launch(f: Path, line: str, why: str) -> PolicyError:
    return PolicyError(f"{quoted(str(f))} does not record a training launch ({why}): {quoted(redact(line), 200)} is not restarted")


def _launcher_program(f: Path, word: str, dfd: int) -> tuple[str, str]:
    """(argv[0], the file to start): the launcher as recorded, and its executable found on the server's own
    PATH, resolved to a file with no link left. A recorded line cannot name another program (a file called
    python elsewhere) and have it run as the launcher: what starts is the file checked, by its resolved path,
    so neither a link swapped after the check (the thirty-eighth round: one approved restart in seven ran a
    script swapped in for `venv/bin/python`) nor a relative PATH entry can change it.

    A relative path (`venv/bin/python`) is judged where it runs, in the recorded command's folder
    (the held `dfd`, which the process starts in), never from the server's own working directory:
    there it can name the real Python while the folder holds a script of that name. A path through
    /proc or /dev names another file in each process (`/proc/self/cwd/python` is the server's folder
    here and the run folder in the child) and is refused."""
    if _PER_PROCESS.match(os.path.normpath(word)) or _PER_PROCESS.match(word):
        raise PolicyError(f"{quoted(str(f))} names its launcher through {quoted(word)}, a path that names another file in "
                          "each process (the server's and the started one's): record the launcher by name or by its real path")
    found = find_program(Path(word).name)
    if "/" not in word:
        if found is None:
            raise PolicyError(f"{quoted(str(f))}: {quoted(word)} is not on the server's PATH: nothing to start")
        return word, os.path.realpath(found)
    # a launcher recorded by any other path than the server's own is started with that argv[0], and its folder chooses what
    # it loads: Python reads pyvenv.cfg beside it or above (site-packages, even the standard library), MPICH's mpirun starts
    # the hydra_pmi_proxy beside it (forty-fourth round: `bin/python` and `bin/mpirun`, links in the run folder to the
    # server's own programs, ran planted code)
    if os.path.normpath(word) not in {os.path.normpath(x) for x in (found, sys.executable) if x}:
        raise PolicyError(f"{quoted(str(f))} names its launcher by a path ({quoted(word)}) that is not the server's own "
                          f"{quoted(Path(word).name)} as the server finds it ({quoted(found or sys.executable)}): the files "
                          "beside a launcher (pyvenv.cfg, hydra_pmi_proxy) choose what it loads; record the launcher by name, "
                          "or start the server from the environment that has it")
    return word, os.path.realpath(word)


# paths whose meaning depends on the process that opens them
_PER_PROCESS = re.compile(r"^/+(?:proc|dev)(?:/|$)")


def _only_a_training_launch(f: Path, line: str, env: dict[str, str], words: list[str], dfd: int) -> None:
    """Refuse what runs a program other than the launcher's Python: variables that pick the program, --no-python, a
    shell, and a launcher's option not known to only place or tune the run."""
    syntax = _shell_syntax(line)
    if syntax:
        raise _not_a_launch(f, line, f"it holds {syntax}: the question would show a shell line, but the command runs as one "
                                     "argument list with no shell, and the answer's manual line would run it in a shell")
    bad_env = sorted(k for k in env if picks_the_program(k))
    if "PYTHONPATH" in env and any(not e.strip() or e != e.strip() for e in env["PYTHONPATH"].split(os.pathsep)):
        # forty-seventh round: an empty entry (`PYTHONPATH=/opt/x:`, `::`) is the working folder, the run folder here, shown
        # as nothing: its sitecustomize.py ran at start-up, and torchrun's agent loads entry points planted there; forty-eighth
        # round: an entry of blanks (`'/opt/x: '`) is a folder of the run folder named by a space
        raise _not_a_launch(f, line, "its PYTHONPATH has an empty entry (a leading, trailing or doubled ':') or one of or "
                                     "around blanks, which Python reads as the working folder, the run folder, or a folder "
                                     "in it, without showing its name; write the folder")
    if bad_env:
        raise _not_a_launch(f, line, f"it sets {', '.join(bad_env)}, which chooses the program that runs or what it loads, or "
                                     "is not one of the variables known only to tune a run (devices, threads, the rendezvous, "
                                     "logging, trackers: docs/security.md, promise 2); run it yourself")
    if why := env_value_refusal(env):
        raise _not_a_launch(f, line, why)
    if any(_PYCACHE_OPTION.search(w) for w in words[1:]):
        raise _not_a_launch(f, line, "-X pycache_prefix chooses where the standard library's compiled code is read from")
    if any(len(opt := w.split("=")[0]) >= 4 and any(n.startswith(opt) for n in _NO_PYTHON) for w in words[1:]):
        raise _not_a_launch(f, line, "--no-python starts a program that is not Python")
    names = [Path(w).name for w in words[1:]]
    shell = next((n for n in names if n in _SHELLS), None)
    if shell:
        raise _not_a_launch(f, line, f"it starts {shell}, not a training script")
    reading = read_launcher(words)
    if reading.refusal:
        raise _not_a_launch(f, line, reading.refusal + "; run it yourself")
    if why := launcher_stages.refusal(words[0], reading, env, dfd):
        raise _not_a_launch(f, line, why)


# Any `$`: bash expands `$VAR`, `${...}`, `$(...)`, and also `$"..."` (a translated string), `$'...'` (escapes) and the special
# parameters `$@ $$ $- $# $!`, none of which shlex reads; before the sixty-fourth round `python $"train.py"` ran a planted
# `$train.py` while the manual line ran `train.py`, and `PYTHONPATH=$@/opt/lib` named a folder of the run folder.
_EXPANSION = re.compile(r"`|\$")


def _shell_syntax(line: str) -> str | None:
    """What in a recorded line only a shell gives a meaning: an operator (`;`, `&&`, `|`, `>`, a
    subshell) or an expansion (`$VAR`, `$(...)`, backticks). A launcher records one command's words."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        op = next((w for w in lex if w and set(w) <= set("();<>|&")), None)
    except ValueError:  # an unclosed quote: refused where the line is split
        return None
    if op is not None:
        return f"the shell operator {quoted(op)}"
    m = _EXPANSION.search(line)
    if m:
        return f"the shell expansion {quoted(m.group(0))}"  # the `$` alone: what follows may be a secret's first characters
    g = next((m for w in _unquoted_words(line) if (m := _GLOB.search(w))), None)
    return f"the shell expansion {quoted(g.group(0))} (a pattern, brace or ~ a shell expands)" if g else None


# Unquoted, a shell expands these too: `*`, `?`, `[...]` to file names, `{a,b}` and `{1..3}` to words, a leading `~` to a
# home folder. Before the ninth round `python {evil,train}.py` passed: the restart ran the literal file name, while the
# answer's manual line, pasted into a shell, ran `python evil.py train.py`.
_GLOB = re.compile(r"[*?\[]|\{[^{}]*(?:,|\.\.)[^{}]*\}|^~|(?<=[=:])~")


def _unquoted_words(line: str) -> list[str]:
    """Each word of `line` with its quoted and backslash-escaped characters replaced by '_': what a shell would expand."""
    words, cur, quote, i = [], [], "", 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif quote == '"' and c == "\\" and i + 1 < len(line):
                i += 1
            cur.append("_" if c != quote else "")
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
            cur.append("_")
        elif c.isspace():
            if cur:
                words.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur:
        words.append("".join(cur))
    return words
