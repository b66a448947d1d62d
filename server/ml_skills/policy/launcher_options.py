"""The options a recorded line may give its launcher (python's, torchrun's), and which hosts its rendezvous options name.

A restart's question shows the recorded line; an option can still make the launcher load code the line does not show
(torchrun's `--logs-specs` names an entry point, `--run-path` starts its worker through multiprocessing, whose bootstrap
imports from the run folder first; python's `-X presite=`) or send the ranks' traffic to another machine. Since the
forty-fifth round both launchers take only the options named here; srun, mpirun and horovodrun are not restarted at all
(policy/restart_command.py), after three rounds broke their allow-lists.
"""

from __future__ import annotations

import builtins
import os
import re
from typing import NamedTuple

# torchrun's rendezvous and master host (also deepspeed's and torch.distributed.launch's), given as options: the ranks
# exchange the model's weights and gradients with whatever joins there. Loopback names the machine itself.
_RENDEZVOUS = {"--rdzv_endpoint": 8, "--master_addr": 10}  # also argparse's unambiguous prefixes (`--rdzv-e`, `--master_a`)
_RENDEZVOUS_ENV = ("MASTER_ADDR", "PET_RDZV_ENDPOINT", "PET_MASTER_ADDR")  # torchrun reads PET_<OPTION> as its option
_LOCAL = re.compile(r"^(?:localhost|127(?:\.\d{1,3}){3}|\[?::1\]?)(?::\d+)?$")

# The rendezvous torchrun may use. Fifty-second round: `--rdzv-conf store_type=file` made the c10d backend read its state from a
# file named by the endpoint (`localhost`, a file of the run folder), and the agent unpickled what was planted there; etcd's
# backends import their client by name. Since the sixtieth round `--rdzv-conf` (and PET_RDZV_CONF) is not taken at all: its
# keys were an allow-list of their own, and a restart from here starts one node, on this machine.
RDZV_BACKENDS = frozenset({"c10d", "static"})
# A run id torchrun puts in the name of the folder it writes its workers' logs to (`tempfile.mkdtemp(prefix=f"{id}_")`): a
# path (`--rdzv-id /srv/x`, `../x`) writes them outside the run folder (sixtieth round). A plain name only.
_RDZV_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]{0,63}$")


def env_value_refusal(env: dict[str, str]) -> str | None:
    """The values of variables judged as the options they stand for: torchrun's rendezvous (`PET_RDZV_BACKEND`,
    `PET_RDZV_ID`) and python's warning filters (`PYTHONWARNINGS`, as `-W`)."""
    if "PET_RDZV_BACKEND" in env and env["PET_RDZV_BACKEND"] not in RDZV_BACKENDS:
        return f"PET_RDZV_BACKEND picks a rendezvous backend other than {' or '.join(sorted(RDZV_BACKENDS))}"
    if "PET_RDZV_ID" in env and not _RDZV_ID.match(env["PET_RDZV_ID"]):
        return _RDZV_ID_REFUSAL
    if "PYTHONWARNINGS" in env and (why := warning_filter_refusal(env["PYTHONWARNINGS"])):
        return why
    return None


_RDZV_ID_REFUSAL = ("its rendezvous id is not a plain name (letters, digits, `_-.`): torchrun names the folder it writes the "
                    "workers' logs to after it, so a path writes them outside the run folder")


def warning_filter_refusal(filters: str, *, one: bool = False) -> str | None:
    """Why warning filters (`-W action:message:category:module:lineno`, one filter: `one`; `PYTHONWARNINGS`, a
    comma-separated list of them) could import a module at start-up, or None. CPython imports a dotted category's module to
    find the class: fifty-fourth round, `-W ignore::unittest.__main__.X` imported unittest's `__main__`, whose test
    discovery ran a `test_*.py` planted in the run folder instead of the script. A category must be empty or one of
    Python's own warning classes. A `-W` value is one filter, split on `:` only: fifty-eighth round, split on commas too,
    `-W ignore:a,b:unittest.__main__.X` read as two filters with no category."""
    for entry in [filters] if one else filters.split(","):
        fields = entry.split(":")
        category = fields[2].strip() if len(fields) > 2 else ""
        if category and not (category.isidentifier() and isinstance(kind := getattr(builtins, category, None), type)
                             and issubclass(kind, Warning)):
            return (f"its warning filter names the category {category[:60]!r}, which Python imports by its module at "
                    "start-up: only Python's own warning classes (DeprecationWarning, UserWarning, ...) are taken")
    return None


def rendezvous(argv: list[str], env: dict[str, str]) -> list[str]:
    """The rendezvous or master host options of a recorded line (`--rdzv-endpoint evil:29400`, `--master_addr=...`, any
    prefix torchrun's argparse takes for them) and the variables that set them (`MASTER_ADDR`, torchrun's `PET_RDZV_ENDPOINT`),
    when they name another machine: before the seventeenth round the
    question named none."""
    found = [n for n in _RENDEZVOUS_ENV if not _LOCAL.match(env.get(n, "localhost"))]
    for i, w in enumerate(argv):
        opt, eq, value = w.partition("=")
        name = "--" + opt[2:].replace("-", "_") if opt.startswith("--") else opt
        if not any(len(name) >= least and full.startswith(name) for full, least in _RENDEZVOUS.items()):
            continue
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if not _LOCAL.match(value):
            found.append(opt)
    return found



# python's own options that tune the interpreter and load nothing: one-letter flags, and the -X names of CPython 3.10-3.14
# but `pycache_prefix` (the folder the standard library's compiled code is read from: ninth round), `presite` (a module
# imported before site) and `frozen_modules` (`=off` imports the frozen standard modules, runpy among them, through
# sys.path, where the run folder comes first: fifty-first round); `-c`, `-m`, `-W` take a value (`-m` is judged in policy/launcher_stages.py). `-i` (a prompt after
# the script) and `-x` (skip the script's first line) are no launch options.
_PYTHON_FLAGS = frozenset("bBdEhIOPqsSuvV")
_PYTHON_VALUED = frozenset("cmWX")
_PYTHON_X = frozenset({"faulthandler", "showrefcount", "tracemalloc", "importtime", "dev", "utf8", "warn_default_encoding",
                       "no_debug_ranges", "int_max_str_digits", "perf", "perf_jit", "cpu_count", "gil",
                       "disable_remote_debug", "context_aware_warnings", "thread_inherit_context", "pathconfig_warnings"})
_PYTHON_LONG = {"--check-hash-based-pycs": {"default", "always", "never"}, "--version": None, "--help": None,
                "--help-env": None, "--help-xoptions": None, "--help-all": None}


# Sixty-first round: `-m MODULE` finds the module by name when the interpreter starts, after every check: `-I`, `-P` or
# PYTHONSAFEPATH leave the run folder off the path and the standard library's module of that name ran (unittest, whose
# discovery imported a planted test_*.py), and a folder's own module deleted after the last check did the same (5 of 5).
# Rounds 43, 46 and 52 had broken the rule that admitted the run folder's own module; a module is not restarted at all.
MODULE_REFUSAL = ("it runs a module by name (`-m`), which the interpreter looks up when it starts, after every check: an "
                  "option, a variable or a file removed in between makes another module of that name run; record the "
                  "script's path, or run the line yourself")


class LaunchReading(NamedTuple):
    refusal: str | None  # why the options could load code the line does not show or start another program, or None
    script: str | None = None  # the script the launcher runs, as written (None for `python -c CODE` or a refusal)
    log_dir: str | None = None  # the folder torchrun's `--log-dir` names, for the caller to look at in the run folder


def read_launcher(words: list[str]) -> LaunchReading:
    """What the launcher `words` (its name first) would do: torchrun's and python's options read as each parses them; any other
    program has no options ml-skills reads."""
    name = os.path.basename(words[0])
    if name == "torchrun":
        return read_torchrun(words[1:])
    return read_python(words[1:]) if name.startswith("python") else LaunchReading(None)


def read_python(args: list[str]) -> LaunchReading:
    """What python's options in `args` would do, read as CPython's option parser reads them: one-letter flags bundle,
    `-c`/`-m`/`-W`/`-X` take the rest of the word or the next word, `-c` and `-m` end the options, and so do `--`, `-`
    and the script."""
    i = 0
    while i < len(args):
        w = args[i]
        if w == "--":
            i += 1
            break
        if w == "-" or not w.startswith("-"):
            break
        if w.startswith("--"):
            if w not in _PYTHON_LONG:
                return LaunchReading(f"python would take {w}, which ml-skills does not know to only tune the interpreter")
            if (values := _PYTHON_LONG[w]) is not None:
                if i + 1 >= len(args) or args[i + 1] not in values:
                    return LaunchReading(f"python's {w} takes one of {', '.join(sorted(values))}")
                i += 1
            i += 1
            continue
        for j, c in enumerate(w[1:], 2):
            if c in _PYTHON_FLAGS:
                continue
            if c not in _PYTHON_VALUED:
                return LaunchReading(f"python would take -{c}, which ml-skills does not know to only tune the interpreter")
            value = w[j:] or (args[i + 1] if i + 1 < len(args) else "")
            i += not w[j:]
            if c in "cm":
                return LaunchReading(MODULE_REFUSAL if c == "m" else None)  # the code runs: what follows is its own
            if c == "W" and (why := warning_filter_refusal(value, one=True)):
                return LaunchReading(why)
            if c == "X" and value.split("=", 1)[0] not in _PYTHON_X:
                return LaunchReading(f"python's -X {value.split('=', 1)[0]} is not one ml-skills knows to only tune the interpreter")
            break
        i += 1
    return _script_at(args, i)


def _script_at(args: list[str], i: int) -> LaunchReading:
    """The script word at `args[i]`, where the launcher's options ended; none for `-` or nothing (the program would be read
    from standard input, which a restart gives as empty)."""
    return LaunchReading(None, args[i] if i < len(args) and args[i] != "-" else None)


# torchrun's options (torch 2.13's argparse, both spellings) that place or tune the run, with the values allowed where a
# value names code: `--logs-specs` (an entry point), `--run-path` (the worker starts through multiprocessing's bootstrap,
# which imports from the run folder first) and `--no-python` (any program) are not among them. argparse takes any unique
# prefix of a long option (`--logs` is `--logs-specs`): a word is read as the option it abbreviates.
_TORCHRUN_VALUED = ("nnodes", "nproc-per-node", "rdzv-backend", "rdzv-endpoint", "rdzv-id", "max-restarts",
                    "monitor-interval", "start-method", "event-log-handler", "role", "log-dir", "redirects", "tee",
                    "local-ranks-filter", "duplicate-stdout-filters", "duplicate-stderr-filters", "node-rank", "master-addr",
                    "master-port", "local-addr", "signals-to-handle", "shutdown-timeout")
_TORCHRUN_FLAGS = ("standalone", "module", "virtual-local-rank", "help")
# Sixtieth round: `--numa-binding` starts each worker under `numactl`, found on the PATH the run folder's line may not set but
# a program the question does not name; `--rdzv-conf` (see RDZV_BACKENDS). Kept in argparse's set of names, so a prefix
# reads as the option it abbreviates.
_TORCHRUN_REFUSED = ("logs-specs", "run-path", "no-python", "numa-binding", "rdzv-conf")
_TORCHRUN_VALUES = {"event-log-handler": {"null", "console", "dynamic_rendezvous"}, "start-method": {"spawn", "fork", "forkserver"},
                    "rdzv-backend": RDZV_BACKENDS}
_TORCHRUN_SHORT = {"-m": "module", "-h": "help", "-r": "redirects", "-t": "tee"}


def _torchrun_option(word: str) -> str | None:
    """The torchrun option (its dashed name) a long-option word names, exactly or as argparse's unique prefix, or None."""
    names = _TORCHRUN_VALUED + _TORCHRUN_FLAGS + _TORCHRUN_REFUSED
    spelled = {f"--{n}": n for n in names} | {f"--{n.replace('-', '_')}": n for n in names}
    if word in spelled:
        return spelled[word]
    hits = {n for s, n in spelled.items() if s.startswith(word)}
    return hits.pop() if len(hits) == 1 else None


# A log folder torchrun makes under the run folder: a relative path of plain names (sixty-first round: `--log-dir` was taken
# with any value; an absolute path or `..` writes the workers' logs outside the run folder, as round 60's `--rdzv-id` did).
_LOG_DIR = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-.]{0,63}(?:/[A-Za-z0-9_][A-Za-z0-9_\-.]{0,63}){0,7}/?$")


def read_torchrun(args: list[str]) -> LaunchReading:
    """What torchrun's options in `args` would do, read as torch 2.13's argparse reads them: a unique prefix is the option
    it abbreviates, a value attached (`--tee=3`, `-t3`) or the next word, and `--` ends the options (forty-sixth round: a
    second, smaller parser read `--`, `--stand` and `-t3` as taking the next word). `-m` is refused (see MODULE_REFUSAL)."""
    i, log_dir = 0, None
    while i < len(args) and args[i].startswith("-"):
        w = args[i]
        if w == "--":
            i += 1
            break
        if w.startswith("--"):
            opt, eq, value = w.partition("=")
            name = _torchrun_option(opt)
        else:
            name, eq, value = _TORCHRUN_SHORT.get(w[:2]), "=" * bool(w[2:]), w[2:]
        if name == "module":
            return LaunchReading(MODULE_REFUSAL, log_dir=log_dir)
        if name is None or name in _TORCHRUN_REFUSED or (name == "help" and w[2:]):
            return LaunchReading(f"torchrun would take {w.partition('=')[0]}, which ml-skills does not know to only place or "
                                 "tune the run (--logs-specs names an entry point to load, --run-path starts the worker "
                                 "through multiprocessing's bootstrap, --no-python any program, --numa-binding numactl, "
                                 "--rdzv-conf where the rendezvous keeps its state)", log_dir=log_dir)
        if name in _TORCHRUN_VALUED:
            if not eq:
                i += 1
                value = args[i] if i < len(args) else ""
                if value.startswith("-"):
                    return LaunchReading(f"torchrun's {w} has no value before {value}", log_dir=log_dir)
            if why := _torchrun_value_refusal(name, value):
                return LaunchReading(why, log_dir=log_dir)
            log_dir = value if name == "log-dir" else log_dir
        elif eq:
            return LaunchReading(f"torchrun's {w.partition('=')[0]} takes no value", log_dir=log_dir)
        i += 1
    if i < len(args) and args[i].startswith("-"):  # `torchrun -- -m MOD`: the worker runs `python -u -m MOD`
        return LaunchReading(f"torchrun would hand {args[i]} to python as its script, where python reads it as an option", log_dir=log_dir)
    return _script_at(args, i)._replace(log_dir=log_dir)


def _torchrun_value_refusal(name: str, value: str) -> str | None:
    if value not in _TORCHRUN_VALUES.get(name, {value}):
        return f"torchrun's --{name} takes one of {', '.join(sorted(_TORCHRUN_VALUES[name]))}"
    if name == "rdzv-id" and not _RDZV_ID.match(value):
        return _RDZV_ID_REFUSAL
    if name == "log-dir" and not _LOG_DIR.match(value):
        return ("its --log-dir is not a folder of the run folder named by plain names (no absolute path, no `..`): torchrun "
                "writes the workers' logs there")
    return None
