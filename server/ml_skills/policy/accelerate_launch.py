"""What `accelerate launch` is given: its own options, and the config file it reads them from.

accelerate copies every key of its config file's sections onto its arguments (`mpirun_config: {no_python: true}` is
`--no_python`: forty-second round, the script then ran as a program and its first line picked the interpreter), and its
multi-machine and TPU settings start other programs (mpirun, deepspeed's multi-node runner, gcloud with `commands`). So
a recorded line may give it only options known to place or tune the run, and a config file in the run folder whose every
key is one of those, read here as accelerate reads it (YAML, or JSON for a `.json` name) before the question is asked.
"""

from __future__ import annotations

import os
import re

import yaml

from ml_skills.policy.folder_routes import read_in_folder
from ml_skills.policy.launcher_options import RDZV_BACKENDS, rdzv_conf_refusal
from ml_skills.safety import untrusted_json

# accelerate launch's options that take no value (accelerate 1.16); every other known option takes one
_FLAGS = frozenset({"cpu", "debug", "downcast_bf16", "dynamo_use_dynamic", "dynamo_use_fullgraph", "dynamo_use_regional_compilation",
                    "enable_cpu_affinity", "fp8_use_autocast_during_eval", "help", "module", "multi_gpu", "quiet", "same_network",
                    "use_deepspeed", "use_fsdp", "use_megatron_lm", "use_parallelism_config", "-h", "-m", "-q"})
# options that name a library accelerate, torch or the worker imports by name, from a path that starts with the run folder
# (forty-fourth round: `--dynamo_backend tvm` imported a planted tvm.py, `--use_megatron_lm` a planted megatron/): Megatron,
# FP8 backends, and any compile backend but torch's own; mixed precision only no/fp16/bf16 (fp8 picks a backend by name)
_IMPORTS_BY_NAME = ("use_megatron_lm", "fp8_", "megatron_lm_")
_SAFE_VALUES = {"dynamo_backend": {"no", "eager", "aot_eager", "inductor"}, "mixed_precision": {"no", "fp16", "bf16"},
                "rdzv_backend": RDZV_BACKENDS}
# ... and those that take one and only place or tune the run (with dashes or underscores, as accelerate takes both)
_VALUED = frozenset({"gpu_ids", "gradient_accumulation_steps", "gradient_clipping", "log_dir", "machine_rank", "main_process_ip",
                     "main_process_port", "main_training_function", "max_restarts", "mixed_precision", "monitor_interval",
                     "num_cpu_threads_per_process", "num_machines", "num_processes", "offload_optimizer_device",
                     "offload_optimizer_nvme_path", "offload_param_device", "offload_param_nvme_path", "rdzv_backend", "rdzv_conf",
                     "role", "tee", "zero3_init_flag", "zero3_save_16bit_model", "zero_stage", "deepspeed_config_file",
                     "deepspeed_moe_layer_cls_names", "-t"})
_FAMILIES = ("fsdp_", "fp8_", "dynamo_", "megatron_lm_", "parallelism_config_")
CONFIG_OPTION = ("--config_file", "--config-file")

# the config file's keys: at the top, and inside its sections (a section's key becomes the argument of that name, or
# fsdp_/fp8_/dynamo_ plus it for those sections, as accelerate renames them)
_TOP = frozenset({"compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "num_processes", "num_machines",
                  "machine_rank", "main_process_ip", "main_process_port", "rdzv_backend", "same_network", "main_training_function",
                  "enable_cpu_affinity", "gpu_ids", "downcast_bf16", "num_cpu_threads_per_process"})
_SECTIONS = frozenset({"deepspeed_config", "fsdp_config", "megatron_lm_config", "dynamo_config", "fp8_config", "parallelism_config",
                       "ipex_config", "mpirun_config"})
_RENAMED = {"fsdp_config": "fsdp", "fp8_config": "fp8", "dynamo_config": "dynamo_"}
# keys `accelerate config` writes with an empty or false value on every machine: they start programs only when set
_OFF_WHEN_EMPTY = frozenset({"tpu_use_cluster", "tpu_use_sudo", "tpu_env", "tpu_name", "tpu_zone", "commands", "command_file",
                             "mpirun_hostfile", "mpirun_ccl", "deepspeed_hostfile", "deepspeed_multinode_launcher",
                             "deepspeed_inclusion_filter", "deepspeed_exclusion_filter", "ipex", "use_xpu"})
_LOCAL = re.compile(r"^(?:localhost|127(?:\.\d{1,3}){3}|::1)$")


def _name(word: str) -> str:
    return word.split("=", 1)[0].lstrip("-").replace("-", "_") if word.startswith("--") else word.split("=", 1)[0]


def launch_options(words: list[str]) -> tuple[list[str], list[str]]:
    """(accelerate's own options, the unknown ones among them) of `accelerate launch OPTIONS SCRIPT ...`: read up to the
    training script, each option with its value as accelerate 1.16 parses them. An option not known to place or tune the
    run (`--no_python`, `--mpirun_hostfile`, `--deepspeed_hostfile`, `--tpu_*`, `--env`, an abbreviation) is unknown."""
    opts: list[str] = []
    unknown: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-"):
        name = _name(words[i])
        if words[i].split("=", 1)[0] in CONFIG_OPTION and config_file(opts) is not None:  # accelerate reads the last one
            unknown.append(f"{words[i].split('=', 1)[0]} a second time (accelerate reads the last, ml-skills judged the first)")
        opts.append(words[i])
        if name.startswith(_IMPORTS_BY_NAME):
            unknown.append(words[i].split("=", 1)[0])
        if name in _FLAGS:
            pass
        elif name in _VALUED or name.startswith(_FAMILIES) or words[i].split("=", 1)[0] in CONFIG_OPTION:
            value = words[i].split("=", 1)[1] if "=" in words[i] else words[i + 1] if i + 1 < len(words) else ""
            if _bad_value(name, value):
                unknown.append(f"{words[i].split('=', 1)[0]} {value}")
            if "=" not in words[i] and i + 1 < len(words):
                opts.append(words[i + 1])
                i += 1
        else:
            unknown.append(words[i].split("=", 1)[0])
        i += 1
    return opts, unknown


def config_file(opts: list[str]) -> str | None:
    """The config file `--config_file` names among accelerate's options, or None."""
    for i, w in enumerate(opts):
        opt, eq, value = w.partition("=")
        if opt in CONFIG_OPTION:
            return value if eq else (opts[i + 1] if i + 1 < len(opts) else "")
    return None


def config_refusal(dfd: int, path: str) -> str | None:
    """Why the config file `path` (in the run folder `dfd`) cannot be restarted with, or None: it must be a plain file of
    the run folder (no link, no `..`), read as accelerate reads it, holding only keys known to place or tune the run."""
    parts = tuple(p for p in path.split("/") if p not in ("", "."))
    if path.startswith("/") or ".." in parts or not parts:
        return f"--config_file {path} is not a file of the run folder: accelerate would read it, unseen"
    raw = read_in_folder(dfd, parts)
    if raw is None:
        return f"--config_file {path} does not exist in the run folder"
    if isinstance(raw, str):
        return f"--config_file {raw.strip('()')}"
    try:
        data = _parsed(raw, path.endswith(".json"))
    except ValueError as e:
        return f"--config_file {path} cannot be read as accelerate reads it ({e})"
    if not isinstance(data, dict):
        return f"--config_file {path} is not a mapping of settings"
    bad = _unknown_keys(data)
    return f"--config_file {path} sets {', '.join(bad)}, not known to only place or tune the run" if bad else None


def _unknown_keys(data: dict) -> list[str]:
    bad = []
    for key, value in data.items():
        k = str(key)
        if k not in _SECTIONS and isinstance(value, (dict, list)) and value:  # fifty-ninth round: accelerate copies a mapping's keys
            # (an empty one, `tpu_env: []` as `accelerate config` writes it, sets nothing)
            bad.append(f"{k} (a mapping or a list where a value belongs: accelerate copies its keys onto its options)")
        elif _bad_value(k, value):
            bad.append(f"{k}: {str(value)[:40]}")
        elif k == "distributed_type" and str(value).upper() in ("DEEPSPEED", "MEGATRON_LM"):
            bad.append("distributed_type: DEEPSPEED (accelerate would start deepspeed, whose per-node launcher imports from the "
                       "run folder)")
        elif k == "compute_environment" and value not in (None, "LOCAL_MACHINE"):
            bad.append(f"compute_environment: {str(value)[:40]}")
        elif k == "main_process_ip" and value and not _LOCAL.match(str(value)):
            bad.append("main_process_ip (another machine)")
        elif k in _SECTIONS and isinstance(value, dict):
            bad += [f"{k}.{inner}" for inner, v in value.items() if not _known_inner(k, str(inner), v)]
        elif k in _SECTIONS and value in (None, {}):
            continue
        elif k not in _TOP and not (k in _OFF_WHEN_EMPTY and not value):
            bad.append(k)
    return bad


def _known_inner(section: str, key: str, value: object) -> bool:
    prefix = _RENAMED.get(section)
    name = key if prefix is None or key.startswith(prefix) else f"{prefix.rstrip('_')}_{key}"
    if name in _SAFE_VALUES or name == "rdzv_conf":
        return not _bad_value(name, value)
    if name.startswith(_IMPORTS_BY_NAME):
        return not value
    return name in _VALUED or name.startswith(_FAMILIES) or (name in _OFF_WHEN_EMPTY and not value)


def _bad_value(name: str, value: object) -> bool:
    """A value outside what the option may hold: a backend named by a library to import, or a rendezvous configuration
    beyond its timing keys (fifty-second round: `--rdzv_conf store_type=file` had the agent unpickle a planted file)."""
    if value is None:
        return False
    if name in _SAFE_VALUES:
        return str(value).lower() not in _SAFE_VALUES[name]
    return name == "rdzv_conf" and rdzv_conf_refusal(str(value)) is not None


def uses_deepspeed(opts: list[str]) -> bool:
    """Whether accelerate's own options send it down its DeepSpeed path (it then starts the `deepspeed` runner)."""
    return any(_name(w) == "use_deepspeed" for w in opts if w.startswith("-"))


def _default_config_path() -> str:
    """Where accelerate looks for its config when the line names none (accelerate.commands.config.default_config_file), from
    the server's own environment: a recorded line may not set HF_HOME or XDG_CACHE_HOME."""
    home = os.path.expanduser(os.environ.get("HF_HOME", os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")))
    yaml_file = os.path.join(home, "accelerate", "default_config.yaml")
    json_file = os.path.join(home, "accelerate", "default_config.json")
    return yaml_file if os.path.isfile(yaml_file) or not os.path.isfile(json_file) else json_file


def default_config_refusal() -> str | None:
    """Why the server's own default accelerate config would make a restart start deepspeed, or None (no such file, or it
    does not choose DeepSpeed). The file is the server owner's, not the run folder's: only that choice is read."""
    path = _default_config_path()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(64 * 1024)
        data = _parsed(raw, path.endswith(".json"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and str(data.get("distributed_type", "")).upper() == "DEEPSPEED":
        return (f"accelerate's default config ({path}) chooses DeepSpeed, which starts its per-node launcher in the run folder, "
                "first on its import path (forty-third round)")
    return None


def _parsed(raw: bytes, json_file: bool) -> object:
    """A config file's settings, as accelerate reads them, or ValueError for any input: JSON through the bounded parser,
    YAML with no anchors or aliases (forty-eighth round: 409 bytes of nested aliases grew ninefold per level when the
    settings were printed, 16 s at eight levels, before the person was asked) and no nesting Python's recursion cannot
    hold (30,000 brackets raised RecursionError)."""
    try:
        text = raw.decode("utf-8")
        if json_file:
            return untrusted_json.loads(text)
        _plain_yaml(text)  # bounds the depth before anything is built; untrusted_json bounds JSON's
        return yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as e:
        raise ValueError(type(e).__name__) from None



def _plain_yaml(text: str) -> None:
    """ValueError when the YAML `text` uses an anchor or an alias, or nests deeper than any config: read event by event,
    so a hostile file stops at its first offending event, before anything is built."""
    depth = 0
    for ev in yaml.parse(text):
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            raise ValueError("it uses YAML anchors or aliases, which no accelerate config needs")
        depth += isinstance(ev, yaml.CollectionStartEvent) - isinstance(ev, yaml.CollectionEndEvent)
        if depth > untrusted_json.MAX_DEPTH:
            raise ValueError("nested deeper than any accelerate config")
