"""The configuration a config-error's signature names: credentials, the Hub, bf16 support, GPUs per rank, a Hydra
target, a script's flags.
"""

from __future__ import annotations

import shlex

from ml_skills.lazyre import lazy

_BF16_UNSUPPORTED = lazy(r"(?i)(?:doesn't|does not|not) support bf16|bf16.{0,40}(?:not supported|unsupported|requires)|"
                         r"Bfloat16 is only supported on GPUs with compute capability")
_HYDRA_TARGET = lazy(r"Error in call to target '([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*){1,8})'")
_ARGPARSE_SCRIPT = lazy(r"^(?:usage: )?([\w./-]{1,200}\.py): error: ")
def config(sig: str | None, decisive: str, above: list[str]) -> list[str]:
    if sig == "experiment-tracker-no-credentials":
        return [("printenv WANDB_API_KEY >/dev/null && echo 'WANDB_API_KEY set' || echo 'WANDB_API_KEY unset'; "
                "grep -s -c api.wandb.ai ~/.netrc   # where W&B looks for a key in the job's environment (none: set one, or WANDB_MODE=offline)")]
    if sig == "model-hub-load-failed" and "huggingface.co" in decisive:
        return [("curl -sS -o /dev/null -w '%{http_code}\\n' https://huggingface.co; ls ${HF_HOME:-~/.cache/huggingface}/hub | head"
                "   # can the job's host reach the Hub, and which models its cache holds (offline: HF_HUB_OFFLINE=1 with a full cache)")]
    if _BF16_UNSUPPORTED.search(decisive):
        return [("nvidia-smi --query-gpu=name,compute_cap --format=csv; python -c \"import torch; print(torch.__version__, torch.version.cuda, "
                "torch.cuda.is_available() and torch.cuda.is_bf16_supported())\"   # bf16 needs compute capability 8.0 (Ampere) or newer "
                "and a CUDA 11 build: else fp16 or fp32")]
    if sig == "duplicate-gpu-per-rank" or "Duplicate GPU detected" in decisive:
        return [("nvidia-smi -L; echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}\"   # the GPUs each rank can see: every rank "
                "must pick its own (torch.cuda.set_device(LOCAL_RANK))")]
    if (m := _HYDRA_TARGET.search("\n".join([*above[-30:], decisive]))) is not None and "unexpected keyword" in "\n".join(above[-30:] + [decisive]):
        module, _, func = m.group(1).rpartition(".")
        if module:
            return [(f"python -c 'import inspect, {module} as m; print(inspect.signature(m.{func}))'   # the parameters {func} takes "
                    "in the installed code, against the keys the config passes it")]
    if sig == "argparse-error" and (m := next((m for line in [*above[-5:], decisive] if (m := _ARGPARSE_SCRIPT.match(line.strip()))), None)):
        return [f"python {shlex.quote(m.group(1))} --help   # the flags and values this version of the script accepts"]
    return []
