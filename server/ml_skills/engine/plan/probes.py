"""The one read-only command that would decide a failure, read from its own evidence.

engine/commands.py builds commands from a few exact wordings (a missing path, a pod, a GCP
permission); these are keyed by what kind of failure the decisive line is (its signature, the
exception that ended the run, the frames it went through) and filled in with the names the log
gives: the device that ran out of memory, the module that would not import, the package whose API
refused a call, the line of the run's own code that raised, the bucket, project, region, job or
pod. Every name copied from the log is checked against the characters such a name can hold, or
shell-quoted; a command that would need a name the log does not give is not emitted.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath

from ml_skills.engine.plan.facts import fact
from ml_skills.engine.read import excerpts
from ml_skills.lazyre import lazy
from ml_skills.models import Classification, FailureClass, LogEvidence, RunFact, TracebackEvent

# --- memory ------------------------------------------------------------------------------------------

_GPU_OOM = lazy(r"(?i)CUDA out of memory|OutOfMemoryError: CUDA|CUDA error: out of memory|cudaMalloc failed|"
                r"cudaSuccess \(2 vs\. 0\)|Cuda failure (?:2 )?'out of memory'|out of memory error on GPU|device:GPU:\d|GPU_\d+_bfc|"
                r"CUBLAS_STATUS_ALLOC_FAILED|on device ordinal \d")
_TPU_OOM = lazy(r"(?i)\bhbm\b|XLA:TPU|\bTPU\b|Attempting to reserve [\d.]+\w at the bottom of memory")
_TORCH_XLA = lazy(r"torch_xla|xla_util\.cc|xla_client")
_JAX = lazy(r"jaxlib|\bjax\b|XlaRuntimeError")
_SLURM_STEP = lazy(r"(?:StepId=|\bstep |\bjob(?:id)?[ =:]+)(\d{3,12})(?:\.\w+)?")
_EVICTED = lazy(r"(?i)node was low on resource: memory|\bEvicted\b")
_RAY_OOM = lazy(r"(?i)ray\.exceptions\.OutOfMemoryError|Task was killed due to the node running low on memory")
_RAY_IP = lazy(r"ray logs raylet\.out -ip (\d{1,3}(?:\.\d{1,3}){3})")
_HOST_OOM = lazy(r"\bMemoryError\b|Unable to allocate [\d.]+ ?\w*B for an array|Out of memory: Killed process|oom-kill|"
                 r"Out Of Memory|cgroup out-of-memory|exit(?:code| code| status)?[:= ]+(?:137|-9)\b|\bKilled\b|device:CPU:\d")

_GPU_MEMORY = ("nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv; "
               "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
               "   # each GPU's size and what else holds memory on it, on the node the run used")
_HOST_MEMORY = ("free -h; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null"
                "   # the host's memory and this container's limit (max: none), on the node the run used")


def _memory(sig: str | None, text: str) -> list[str]:
    """Where the memory ran out decides the fix: a GPU, a TPU's HBM, the host or container, shared memory, a scheduler's limit."""
    if sig == "shm-exhausted" or re.search(r"(?i)shared memory \(shm\)|out of shared memory", text):
        return [("df -h /dev/shm   # the shared memory DataLoader workers pass batches through (a container's default is 64M: "
                "docker run --shm-size, or an emptyDir with medium: Memory on Kubernetes)")]
    if sig == "windows-paging-file" or "WinError 1455" in text:
        return [("powershell -Command \"Get-CimInstance Win32_PageFileUsage | Format-List Name,AllocatedBaseSize,CurrentUsage\""
                "   # the paging file's size: each DataLoader worker maps the CUDA DLLs into it")]
    if "device:CPU" in text:
        return [_HOST_MEMORY]
    if (_GPU_OOM.search(text) or sig == "tf-oom-allocating") and not _TPU_OOM.search(text):
        out = [_GPU_MEMORY]
        if _JAX.search(text):
            out.append("echo \"XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE-unset} "
                       "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION-unset}\""
                       "   # JAX takes 75% of the GPU at start unless these say otherwise")
        return out
    if sig == "xla-oom" or _TPU_OOM.search(text) or ("RESOURCE_EXHAUSTED" in text and _JAX.search(text)):
        if _TORCH_XLA.search(text):
            return [("python -c 'import torch_xla.core.xla_model as xm; print(xm.get_memory_info(xm.xla_device()))'"
                    "   # the XLA device's memory limit and use, on the host the run used")]
        if _TPU_OOM.search(text):
            return [("python -c 'import jax; [print(d.device_kind, d.memory_stats()) for d in jax.local_devices()]'"
                    "   # each TPU core's HBM limit (bytes_limit) and peak use, on the host the run used")]
        return [_GPU_MEMORY, ("echo \"XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE-unset} "
                "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION-unset}\""
                "   # JAX takes 75% of the GPU at start unless these say otherwise")]
    if ("slurmstepd" in text or "srun: error" in text) and (job := _SLURM_STEP.search(text)) is not None:
        return [(f"sacct -j {job.group(1)} --format=JobID,State,ReqMem,MaxRSS,Elapsed"
                 "   # the memory the job asked for against the most any step used")]
    if _EVICTED.search(text):
        return [("kubectl get events -A --field-selector reason=Evicted --sort-by=.lastTimestamp | tail -5"
                "   # which pods the kubelet evicted, from which node, using how much memory against their request")]
    if _RAY_OOM.search(text):
        if (ip := _RAY_IP.search(text)) is not None:
            return [(f"ray logs raylet.out -ip {ip.group(1)} | grep -i -E 'memory|kill' | tail -20"
                    "   # the raylet's memory monitor: which worker it killed and the node's usage then")]
        return [_HOST_MEMORY]
    if sig in ("host-memoryerror", "oom-killer", "sigkill-exit-137", "memory-limit-kill") or _HOST_OOM.search(text):
        return [_HOST_MEMORY]
    return []


# --- python exceptions ---------------------------------------------------------------------------

_NO_MODULE = lazy(r"No module named '?([A-Za-z_][\w.]{0,80})'?")
_CANNOT_IMPORT = lazy(r"cannot import name '(\w{1,80})' from '([\w.]{1,80})'(?: \(([^()\n]{1,300})\))?")
_PIP_HINT = lazy(r"`?pip install ([A-Za-z0-9][\w.-]{0,60})`?")
_GLIBC = lazy(r"(/[\w./-]*libc\.so\.6): version `(GLIBC_[\d.]+)' not found")
_FRAME = lazy(r'^\W*(?:\[rank\d+\]:\s*)?\s*File "([^"\n]{1,300})", line (\d{1,7}), in ([\w.<>]{1,120})')
_LIBRARY_PATH = lazy(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_]\w{0,60})")
_STDLIB = lazy(r"[/\\]lib[/\\]python\d[\d.]*[/\\](?!site-packages|dist-packages)|^<")
_PY_NAME = lazy(r"^[A-Za-z_][\w.]{0,80}$")
_PKG = lazy(r"^[A-Za-z0-9][\w.-]{0,60}$")
_IMPORT_KIND = lazy(r"ModuleNotFoundError|ImportError")


def _traceback_at(logs: list[LogEvidence], cls: Classification) -> TracebackEvent | None:
    """The exception the decisive line belongs to, or the log's last one when the decisive line is none's."""
    tbs = [t for log in logs for t in log.tracebacks]
    if not tbs:
        return None
    d = cls.decisive
    if d is not None:
        near = [t for t in tbs if t.source == d.source and t.start_line - 3 <= d.line_no <= t.line_no + 3]
        if near:
            return near[-1]
    return tbs[-1]


def _above(logs: list[LogEvidence], cls: Classification, tb: TracebackEvent | None, tail: list[str], n: int = 80) -> list[str]:
    """The lines up to the decisive one (or to the end of its traceback, when a worker's re-raise comes first and its original
    traceback after): read from the log file when it is one, else from the excerpts the scan kept."""
    d = cls.decisive
    if d is None:
        return tail
    end = max(d.line_no, tb.line_no if tb is not None and tb.source == d.source and tb.line_no - d.line_no <= n else 0)
    log = next((lg for lg in logs if lg.source == d.source), None)
    if log is not None and Path(d.source).is_file():
        try:
            ex = excerpts.excerpt_around(log, d.line_no, n, end - d.line_no)  # seeks by the scan's byte offsets
            return ex.lines[: max(0, end - ex.start_line + 1)]
        except (OSError, ValueError):
            pass
    kept = {ex.start_line + i: text for log in logs if log.source == d.source for ex in (log.head, log.tail) if ex
            for i, text in enumerate(ex.lines)}
    above = [kept[k] for k in sorted(kept) if d.line_no - n <= k <= end]
    return above or tail


def _frames(lines: list[str]) -> list[tuple[str, int, str]]:
    """(file, line, function) of the frames printed in these lines, outermost first."""
    return [(m.group(1), int(m.group(2)), m.group(3)) for line in lines if (m := _FRAME.match(line)) is not None]


def _module_check(module: str) -> str:
    top = module.split(".")[0]
    return (f"python -c 'import sys; print(sys.executable)'; python -m pip show {top}"
            f"   # the interpreter the job runs and whether {top} is installed in it (its pip name may differ)")


def _imports(text: str) -> list[str]:
    out: list[str] = []
    if (m := _GLIBC.search(text)) is not None:
        out.append(f"ldd --version | head -1; strings {shlex.quote(m.group(1))} | grep -E '^GLIBC_2' | sort -V | tail -3"
                   f"   # the newest glibc this host has; the wheel needs {m.group(2)}")
        return out
    if (m := _CANNOT_IMPORT.search(text)) is not None:
        name, module, path = m.group(1), m.group(2), m.group(3)
        if path and not _LIBRARY_PATH.search(path) and path.endswith(".py"):
            out.append(f"grep -n -w {shlex.quote(name)} {shlex.quote(path)}   # is {name} defined in the file Python imported "
                       f"{module} from (a stale copy, a name changed)?")
        else:
            out.append(_module_check(module))
        return out
    if (m := _NO_MODULE.search(text)) is not None and _PY_NAME.match(m.group(1)):
        return [_module_check(m.group(1))]
    if (m := _PIP_HINT.search(text)) is not None and _PKG.match(m.group(1)):
        return [f"python -m pip show {m.group(1)}   # is it installed in the interpreter the job runs"]
    return []


_API_MISMATCH = lazy(r"unexpected keyword|positional argument|required (?:positional |keyword-only )?argument|has no attribute|"
                     r"is (?:invalid|not supported|deprecated|incompatible)|Allowed \w+ values|requires? (?:torch|transformers|\w+>=)|no longer|renamed|removed")


def _library(tb: TracebackEvent | None, frames: list[tuple[str, int, str]], message: str) -> str | None:
    """The installed package whose API refused the call (a keyword it does not take, a value it does not allow): the exception
    type's own package, or the innermost library frame. None when the message is not about an API."""
    if not _API_MISMATCH.search(message):
        return None
    if tb is not None and "." in tb.exc_type:
        top = tb.exc_type.split(".")[0]
        if top not in ("builtins", "__main__") and _PY_NAME.match(top):
            return top
    for file, _, _ in reversed(frames):
        if (m := _LIBRARY_PATH.search(file)) is not None:
            return m.group(1)
    return None


def _version_of(pkg: str) -> str:
    return (f"python -c 'import {pkg}; print({pkg}.__version__, {pkg}.__file__)'"
            f"   # the {pkg} the job imports: the API the error is about belongs to this version")


def _own_line(frames: list[tuple[str, int, str]]) -> str | None:
    """The innermost frame of the run's own code: the line that raised, or that called into the library that did."""
    for file, line, func in reversed(frames):
        if _LIBRARY_PATH.search(file) or _STDLIB.search(file) or not file.endswith(".py") or "..." in file:
            continue
        start = max(1, line - 3)
        where = "at the script's top level" if func.startswith("<") else f"in {func[:60]}"
        return (f"sed -n '{start},{line + 3}p' {shlex.quote(file)}   # line {line} of the run's own code, {where}, "
                "where it failed (from the run's working directory)")
    return None


# --- configuration the signature names --------------------------------------------------------------

_BF16_UNSUPPORTED = lazy(r"(?i)(?:doesn't|does not|not) support bf16|bf16.{0,40}(?:not supported|unsupported|requires)|"
                         r"Bfloat16 is only supported on GPUs with compute capability")
_HYDRA_TARGET = lazy(r"Error in call to target '([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*){1,8})'")
_ARGPARSE_SCRIPT = lazy(r"^(?:usage: )?([\w./-]{1,200}\.py): error: ")
_MODULE_SCRIPT = lazy(r'File "([^"\n]{1,300}\.py)", line \d+, in <module>')


def _config(sig: str | None, decisive: str, above: list[str]) -> list[str]:
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


def _launch_blocking(above: list[str], tail: list[str]) -> list[str]:
    """A device-side assert is reported at a later, unrelated call: a synchronous rerun of the script puts it at the op."""
    script = next((m.group(1) for line in [*above, *tail] if (m := _MODULE_SCRIPT.search(line))), None)
    if script is None or _LIBRARY_PATH.search(script):
        return []
    return [(f"CUDA_LAUNCH_BLOCKING=1 python {shlex.quote(script)}   # with the run's own arguments: kernels run one at a time, so the "
            "traceback stops at the op whose index is out of range")]


# --- paths and storage ---------------------------------------------------------------------------

_STORAGE_WRITE = lazy(r"(?i)file write failed|unexpected pos \d+|iostream error|cannot be opened|write\(\): fd \d+ failed|"
                      r"Input/output error|\[Errno 5\]|save failed")
_EIO = lazy(r"(?i)Input/output error|\[Errno 5\]|\bEIO\b")
# Python quotes a path that holds a ' with "
_ERRNO_PATH = lazy(r"\[Errno \d+\] [^:\n]{3,60}: (?:'([^'\n\r]{1,300})'|\"([^\"\n\r]{1,300})\")|"
                   r"\bFile (/?[\w.~@+=-]+(?:/[\w.~@+=-]+)+) cannot be opened")
_CAN_NOT_OPEN = lazy(r"can't open file '([^'\n\r]{1,300})'")
_NOT_FOUND_IN = lazy(r"(?i)(?:No \w+ found in|nonexistent paths?:? \[?'?|does not exist(?: in)?:? '?|Dataset does not exist:)\s*"
                     r"'?(/?[\w.~@+=-]+(?:/[\w.~@+=-]*)+|/[\w.~@+=-]+)'?")
_BARE_MISSING = lazy(r"No such file or directory: '([\w.+-]{1,80})'")
_NOT_IN_PATH = lazy(r"(?:^|\s)(?:sh: \d+: )?([\w.+-]{1,60}): (?:command )?not found\b")
_CKPT_FILE = lazy(r"['\"(\s=](/?[\w.~@+=-]+(?:/[\w.~@+=-]+)*\.(?:pt|pth|ckpt|bin|safetensors|pkl|pickle|h5|keras|npz|msgpack))\b['\")]?")
_CORRUPT = lazy(r"(?i)invalid load key|failed finding central directory|unexpected EOF|file might be corrupted|EOF read where object|"
                r"Ran out of input|not a zip file|HeaderTooLarge|truncated")


def _dir_of(path: str) -> str:
    p = PurePosixPath(path)
    return str(p.parent) if p.suffix else path


def _paths(text: str, frames: list[tuple[str, int, str]], tail: list[str], above: list[str], primary: FailureClass | None) -> list[str]:
    out: list[str] = []
    if (m := _CAN_NOT_OPEN.search(text)) is not None:
        p = m.group(1)
        out.append(f"ls -la {shlex.quote(p)}; ls -la {shlex.quote(_dir_of(p))} | head -20   # is the script there, for the job's "
                   "user, on the node the job ran on?")
        return out
    started = any("subprocess" in f or fn == "_execute_child" for f, _, fn in frames)
    if (m := _BARE_MISSING.search(text)) is not None and started:
        out.append(f"command -v {shlex.quote(m.group(1))} || echo \"not on PATH=$PATH\"   # the program the run started is not installed "
                   "or not on the job's PATH")
        return out
    if (m := _ERRNO_PATH.search(text)) is not None:
        p = m.group(1) or m.group(2) or m.group(3)
        d = _dir_of(p)
        if _EIO.search(text) or _STORAGE_WRITE.search(text):
            out.append(f"df -h {shlex.quote(d)}; findmnt -T {shlex.quote(d)}; dmesg -T | grep -i -E 'I/O error|EXT4-fs|XFS|nfs|fuse' | tail -5"
                       "   # space, mount and the kernel's storage errors for that path")
        elif d in (p, ".", "/"):
            out.append(f"ls -la {shlex.quote(p)}   # what is at the path now, from the run's working directory")
        else:
            out.append(f"ls -la {shlex.quote(p)}; ls -ld {shlex.quote(d)}   # what is at the path now (owner, mode, a left-over)")
        return out
    if (m := _NOT_FOUND_IN.search(text)) is not None:
        p = m.group(1)
        out.append(f"ls -la {shlex.quote(p)} | head -20   # what is at the path the run looked in, from its working directory")
        return out
    if (m := _BARE_MISSING.search(text)) is not None:
        out.append(f"ls -la {shlex.quote(m.group(1))}   # from the run's working directory: the file it opened by that name")
        return out
    if (m := _NOT_IN_PATH.search(text)) is not None:
        name = m.group(1)
        out.append(f"command -v {shlex.quote(name)} || echo \"not on PATH=$PATH\"   # the program the step runs is not installed "
                   "in its image or not on its PATH")
        return out
    if _CORRUPT.search(text) and primary in (FailureClass.IO_CHECKPOINT, FailureClass.DATA_PIPELINE, None):
        ckpt = next((m.group(1) for line in reversed([*tail, *above]) for m in [_CKPT_FILE.search(line)] if m), None)
        if ckpt:
            q = shlex.quote(ckpt)
            out.append(f"ls -la {q}; head -c 64 {q} | od -c | head -4   # its size, and its first bytes: a torch zip starts with PK, "
                       "'<' is an HTML page, 'version https://git-lfs' an LFS pointer")
            return out
    if primary is FailureClass.IO_CHECKPOINT and _STORAGE_WRITE.search(text):
        if _EIO.search(text):
            out.append("dmesg -T | grep -i -E 'I/O error|EXT4-fs|XFS|nfs|fuse|blk_update' | tail -5; df -h .   # the kernel's storage "
                       "errors around the failure, and the space left where the run writes")
        else:
            out.append("df -h . ${TMPDIR:-/tmp}; df -i .   # space and inodes left where the run writes its checkpoints")
    return out


# --- clouds and orchestrators ----------------------------------------------------------------------

_GCP_QUOTA_METRIC = lazy(r"exceed quota limits: ((?:[a-z]+\.)+googleapis\.com)/([\w/-]{3,120})")
_GCP_QUOTA_PROJECT = lazy(r"Quota failure for project ([a-z][a-z0-9-]{4,28}[a-z0-9])(?![\w-])")
_GCE_QUOTA = lazy(r"Quota '([A-Z0-9_]{3,60})' exceeded\.\s+Limit: [\d.]+ (?:in region ([a-z]+-[a-z]+\d)|globally)")
_GCP_REQUIRED = lazy(r"Required '([a-z]+\.[\w.]+)' permission for '(?://[\w.]+/)?projects/([a-z][a-z0-9-]{4,28}[a-z0-9])(?![\w-])")
_GCS_BUCKET = lazy(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])|does not have storage\.\w+\.\w+ access to (?:the Google Cloud Storage "
                   r"bucket )?(?!the\b)([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(?:/|\.(?:\s|$)|\s|$)|/storage/v1/b/([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])|"
                   r"to the bucket \\?[\"'`]([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])\\?[\"'`]")
_GCP_DENIED = lazy(r"(?i)PERMISSION_DENIED|PermissionDenied|HTTP response code 40[13]|Forbidden|does not have [a-z]+\.[\w.]+ access|"
                   r"does not have `?\[?[a-z]+\.[\w.]+.{0,80}IAM permission|"
                   r"UNAUTHENTICATED|anonymous caller")
# "Error executing an HTTP request": TensorFlow's GCS file system (gs:// paths read and written through tf.io.gfile)
_GCP_CONTEXT = lazy(r"googleapis|gcloud|gs://|\bGCS\b|Google Cloud|gcr\.io|serviceaccount|aiplatform|storage\.\w+\.\w+|"
                    r"Error executing an HTTP request")
_AWS_CLIENT = lazy(r"An error occurred \((AccessDenied\w*|403|Forbidden|UnauthorizedOperation|AccessDeniedException)\) when calling the "
                   r"(\w{2,60}) operation")
_AWS_ROLE = lazy(r"arn:aws:iam::\d{12}:role/([\w+=,.@/-]{1,128})'?")
_AWS_ASSUME = lazy(r"(?i)unable to assume the role|sts:AssumeRole|AssumeRoleWithWebIdentity")
_AZ_CONTEXT = lazy(r"(?i)azure|azureml|\baz ml\b|Microsoft\.\w+|\bAML\b|Compute Instance|storage account|"
                  r"invalid status code '|HttpResponseError|aka\.ms/")
_AZ_DENIED = lazy(r"(?i)invalid status code 'Forbidden'|AuthorizationFailed|(?:not|n't) have permission|not an owner or assigned user|"
                  r"status code 'Unauthorized'")
_AZ_QUOTA = lazy(r"(?i)OutOfQuota|vCPU quota of \d+|cluster CPU quota|Family (?:v?CPUs|Cores) quota")
_SM_TYPE = lazy(r"training-job/(ml\.[a-z0-9]{1,8}\.\d{0,2}x?large)|\b(ml\.[a-z0-9]{1,8}\.\d{0,2}x?large) for training job usage")
_ACT_AS = lazy(r"permission to act as service[_ ]account:? `?([\w.-]{1,80}@[\w-]{1,80}\.(?:iam\.)?gserviceaccount\.com)")
_AZ_CLIENT = lazy(r"The client '([0-9a-f-]{36})'.{0,200}?perform action '([\w./-]{3,200})'(?: over scope '(/[\w./-]{3,400})')?")
_AZ_FAMILY = lazy(r"(Standard [\w ]{2,40}? Family) (?:v?CPUs|Cores) quota")
_AZ_LOCATION = lazy(r"\b(?:location|region)[ :='\"]+([a-z]+(?:us|europe|asia|uk|india|japan|australia|brazil|canada|korea|france|"
                    r"germany|norway|africa|uae|switzerland)\w*\d?)\b|\b((?:east|west|central|north|south|southcentral|northcentral|"
                    r"westcentral)us\d?|(?:north|west)europe)\b")
_TRAINING_OP = lazy(r"\b(TFJob|PyTorchJob|MPIJob|XGBoostJob|PaddleJob|MXJob|JAXJob) ([a-z0-9][a-z0-9.-]{0,62}) has failed")
_ARGO_CHILD = lazy(r"child '([a-z0-9][a-z0-9.-]{2,62})' failed")
_IMAGE = lazy(r"(?:pulling image|pull image|Failed to pull image) \\?\"([\w./:@-]{2,200})\\?\"")
_K8S_STEP = lazy(r"(?i)This step is in (?:Failed|Error|Pending) state|phase: Failed|exitCode: \d+|kubelet|ImagePullBackOff|ErrImagePull|"
                 r"argoproj/argo|WorkflowExecutor|Failed to determine pid for containerID|Error \(exit code \d+\)|"
                 r"executable file not found in \$PATH")
_ZENML_STACK = lazy(r"Running pipeline [\w-]{1,80} on stack ([\w-]{1,80})")
_ZENML_FAILED = lazy(r"Failed to run step [\w-]{1,80}|Pipeline run has failed|failed for component '[\w-]{1,80}'")
_METAFLOW_SERVICE = lazy(r"Metadata request \(/flows/[\w/-]{1,200}\) failed \(code 5\d\d\)")
_KFP_API_DOWN = lazy(r"failed to (?:execute component|create task).{0,80}(?:Unavailable|connection (?:error|refused))")
_SM_CONTEXT = lazy(r"sagemaker-containers|ExecuteUserScriptError|sagemaker\.exceptions|/aws/sagemaker/")
_SM_JOB = lazy(r"(?:Error for Training job|Error training) ([A-Za-z0-9][A-Za-z0-9-]{0,62})[:\s]")
_AZML_RUN = lazy(r"RunId(?: for [\w ]{1,60})? is ([\w-]{8,80})")
_AZML_COMPUTE = lazy(r"AzureMLCompute cluster ([\w-]{2,32}) does not exist")


def _gcp(text: str) -> list[str]:
    out: list[str] = []
    if (m := _GCP_QUOTA_METRIC.search(text)) is not None:
        service, metric = m.group(1), m.group(2)
        out.append(f"gcloud alpha services quota list --service={service} --consumer=projects/$(gcloud config get-value project) "
                   f"--filter='metric:{service}/{metric}' --format=json   # the limit and usage of the quota the job exceeded "
                   "(per region: request an increase where the job runs)")
    elif (m := _GCP_QUOTA_PROJECT.search(text)) is not None:
        out.append(f"gcloud alpha services quota list --service=ml.googleapis.com --consumer=projects/{m.group(1)} --format=json"
                   "   # the project's accelerator quotas for training jobs: a limit of 0 needs an increase request")
    if (m := _GCE_QUOTA.search(text)) is not None:
        metric, region = m.group(1), m.group(2)
        where = f"gcloud compute regions describe {region}" if region else "gcloud compute project-info describe"
        out.append(f"{where} --flatten=quotas --format='table(quotas.metric,quotas.limit,quotas.usage)' | grep -w {metric}"
                   "   # the quota's limit and usage")
    if (m := _GCP_REQUIRED.search(text)) is not None:
        out.append(f"gcloud projects get-iam-policy {m.group(2)} --flatten=bindings "
                   "--filter=\"bindings.members:$(gcloud config get-value account)\" --format='value(bindings.role)'"
                   f"   # the roles the active account has there; one must grant {m.group(1)}")
    if (m := _GCS_BUCKET.search(text)) is not None and _GCP_DENIED.search(text):
        bucket = next(g for g in m.groups() if g)
        out.append(f"gcloud storage buckets get-iam-policy gs://{bucket}   # who may read and write the bucket; the job's service account "
                   "needs a storage role on it (and the bucket must be in a project it can reach)")
    if (m := _ACT_AS.search(text)) is not None:
        out.append(f"gcloud iam service-accounts get-iam-policy {m.group(1)} --format=json   # who may act as it: the caller needs "
                   "roles/iam.serviceAccountUser on this service account")
    if not out and _GCP_DENIED.search(text) and _GCP_CONTEXT.search(text):
        out.append("gcloud auth list; gcloud config list   # the account and project the job's credentials resolve to "
                   "(on a VM or pod: its service account)")
    return out


def _aws(text: str) -> list[str]:
    out: list[str] = []
    if _AWS_ASSUME.search(text) and (role := _AWS_ROLE.search(text)) is not None:
        name = role.group(1).split("/")[-1]
        out.append(f"aws iam get-role --role-name {shlex.quote(name)} --query Role.AssumeRolePolicyDocument"
                   "   # the principals allowed to assume the role: the service or identity provider must be one of them")
    if (m := _SM_TYPE.search(text)) is not None and "service limit '" not in text:  # commands.py reads the limit's own name
        kind = m.group(1) or m.group(2)
        out.append(f"aws service-quotas list-service-quotas --service-code sagemaker --query \"Quotas[?contains(QuotaName, '{kind} for "
                   "training job usage')].[QuotaName,Value]\" --output table"
                   f"   # the account's limit for {kind} training jobs in this region (0: request an increase, or another type)")
    if not out and (m := _AWS_CLIENT.search(text)) is not None:
        out.append(f"aws sts get-caller-identity   # the identity the job calls {m.group(2)} as (run where the job runs): "
                   "its policies must allow that call on the resource")
    return out


def _azure(text: str) -> list[str]:
    out: list[str] = []
    if (m := _AZ_CLIENT.search(text)) is not None:
        scope = f" --scope {shlex.quote(m.group(3))}" if m.group(3) else " --all"
        out.append(f"az role assignment list --assignee {m.group(1)}{scope} --output table"
                   f"   # the roles the client has; one must allow {m.group(2)}")
    if (m := _AZ_FAMILY.search(text)) is not None and (loc := _AZ_LOCATION.search(text)) is not None:
        family = m.group(1)
        location = loc.group(1) or loc.group(2)
        out.append(f"az vm list-usage --location {location} --query \"[?contains(name.localizedValue, '{family}')]\" --output table"
                   "   # the family's core limit and use in that region")
    if not out and _AZ_DENIED.search(text) and _AZ_CONTEXT.search(text):
        out.append("az account show --query '{subscription:name,id:id,user:user.name}'; az role assignment list --assignee "
                   "\"$(az ad signed-in-user show --query id -o tsv)\" --all --output table   # the identity and subscription the call "
                   "used, and the roles it holds (the workspace, compute or storage account must be in one of their scopes)")
    if not out and _AZ_QUOTA.search(text) and _AZ_CONTEXT.search(text):
        out.append("az ml compute list-usage --output table   # the subscription's core quotas and use in the workspace's region "
                   "(with the workspace and resource group set by az configure --defaults)")
    if (m := _AZML_COMPUTE.search(text)) is not None:
        out.append(f"az ml compute list --output table   # the compute targets the workspace has; {m.group(1)} is not one of them")
    elif (m := _AZML_RUN.search(text)) is not None:
        out.append(f"az ml job show --name {m.group(1)} --query '{{status:status,error:error}}'"
                   "   # the run's own error (with the workspace and resource group set by az configure --defaults)")
    return out


def _orchestrator(text: str) -> list[str]:
    out: list[str] = []
    if (m := _TRAINING_OP.search(text)) is not None:
        kind, name = m.group(1).lower(), m.group(2)
        out.append(f"kubectl describe {kind} {name}; kubectl get pods -l training.kubeflow.org/job-name={name} -o wide"
                   "   # which replica failed, and its pod's exit reason (OOMKilled, Evicted, preempted)")
    elif (m := _ARGO_CHILD.search(text)) is not None:
        out.append(f"kubectl describe pod {m.group(1)}; kubectl logs {m.group(1)} -c main --tail=50"
                   "   # the failed step's pod: its exit reason and the last lines of its own log")
    if (m := _IMAGE.search(text)) is not None:
        out.append(f"docker manifest inspect {shlex.quote(m.group(1))} >/dev/null && echo found   # does the image exist, and can these "
                   "credentials read it (the nodes pull with their own)")
    elif not out and _K8S_STEP.search(text):
        out.append("kubectl get pods -A --field-selector=status.phase=Failed -o wide --sort-by=.status.startTime | tail -5"
                   "   # the step's pod, to describe it (exit code and reason: OOMKilled, Error, Evicted)")
    if (m := _ZENML_STACK.search(text)) is not None and _ZENML_FAILED.search(text):
        out.append(f"zenml stack describe {m.group(1)}   # the components (and their flavors and settings) the failed step ran with")
    if _METAFLOW_SERVICE.search(text):
        out.append("curl -sS -w ' %{http_code}\\n' \"$METAFLOW_SERVICE_URL/ping\"   # is the metadata service the flow reports to "
                   "answering now (5xx: its server or database, not the flow's code)")
    if _KFP_API_DOWN.search(text):
        out.append("kubectl get pods -n kubeflow -o wide | grep -v -E 'Running|Completed'   # the pipeline's own services "
                   "(API server, metadata, MinIO) that the step could not reach")
    if (m := _SM_JOB.search(text)) is None and _SM_CONTEXT.search(text):
        out.append("aws sagemaker list-training-jobs --status-equals Failed --sort-by CreationTime --max-results 3 "
                   "--query 'TrainingJobSummaries[].[TrainingJobName,CreationTime]' --output table   # the failed job, then "
                   "aws sagemaker describe-training-job --training-job-name with its name for its FailureReason")
    if m is not None:
        job = m.group(1)
        out.append(f"aws sagemaker describe-training-job --training-job-name {job} --query '[FailureReason,SecondaryStatus]'; "
                   f"aws logs tail /aws/sagemaker/TrainingJobs --log-stream-name-prefix {job} | tail -50"
                   "   # the job's reason and the last lines of the training script's own log")
    return out


# --- native crashes by pid ---------------------------------------------------------------------------

_CRASH_PID = lazy(r"exitcode: -(\d{1,2})\)? local_rank: \d+ \(pid: (\d{1,9})\)|SIG\w{2,6} \(@0x[0-9a-f]+\) received by PID (\d{1,9})")


def _crash_pid(text: str) -> list[str]:
    if (m := _CRASH_PID.search(text)) is None:
        return []
    pid = m.group(2) or m.group(3)
    return [(f"coredumpctl info --no-pager {pid} | head -60; dmesg -T | grep -E '\\[{pid}\\]|pid {pid}\\b' | tail -3"
            f"   # the native stack of the process that died (pid {pid}) if systemd-coredump kept its core, and the kernel's line for it")]


# --- CUDA stack ------------------------------------------------------------------------------------

_CUDA_LIB = lazy(r"(?i)CUDNN_STATUS_\w+|cuDNN error|CUBLAS_STATUS_\w+|CUBLAS failure|the library was not initialized|"
                 r"could not create cudnn handle")
_TF = lazy(r"tensorflow|\bTF\b|stream_executor")


def _cuda_stack(text: str) -> list[str]:
    if not _CUDA_LIB.search(text):
        return []
    if _JAX.search(text) or "XLA" in text:
        return [("nvidia-smi; python -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())'"
                "   # driver and the CUDA build JAX loaded")]
    if _TF.search(text):
        return [("nvidia-smi; python -c 'import tensorflow as tf; print(tf.__version__, tf.sysconfig.get_build_info())'"
                "   # driver, and the CUDA and cuDNN versions this TensorFlow was built for")]
    return [("nvidia-smi; python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), "
            "torch.cuda.get_arch_list())\"   # driver, and the CUDA and cuDNN this torch build ships, and the GPUs it supports")]


# --- the launch command with a smaller batch ---------------------------------------------------------

_BATCH_FLAG = lazy(r"^--(?:per[-_]device[-_]train[-_])?(?:train[-_])?(?:micro[-_])?batch[-_]size$")


def smaller_batch_command(launch: str | None) -> str | None:
    """The run's launch command with its batch-size flag halved (shlex-joined words), or None when it has none."""
    from ml_skills.engine.plan.fixes import launch_words

    words = launch_words(launch) if launch else None
    if not words:
        return None
    for i, w in enumerate(words):
        flag, eq, value = w.partition("=")
        if _BATCH_FLAG.match(flag):
            raw = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if not raw.isdigit() or int(raw) < 2:
                return None
            half = str(int(raw) // 2)
            new = [*words]
            if eq:
                new[i] = f"{flag}={half}"
            else:
                new[i + 1] = half
            return shlex.join(new) + f"   # the same launch with half the batch ({raw} -> {half}); keep the effective batch with gradient accumulation"
    return None


def probe_commands(cls: Classification, logs: list[LogEvidence], facts: list[RunFact], decisive: str, tail: list[str]) -> list[str]:
    """The commands that decide this failure's kind, filled in from its evidence; [] when none fits or a name is missing."""
    primary = cls.primary
    d = cls.decisive
    sig = next((h.signature_id for log in logs for h in log.hits if d is not None and h.source == d.source and h.line_no == d.line_no),
               None)
    text = "\n".join([decisive, *tail[-40:]])
    tb = _traceback_at(logs, cls)
    above = _above(logs, cls, tb, tail)
    frames = _frames(above)
    out: list[str] = []
    if primary is FailureClass.OOM:
        launch = fact(facts, "launch_command")
        if (cmd := smaller_batch_command(launch.value if launch else None)) is not None:
            out.append(cmd)
        out += _memory(sig, "\n".join([decisive, *tail[-12:]]))
    if primary in (FailureClass.CLOUD_PERMISSIONS_QUOTA, FailureClass.PIPELINE_ORCHESTRATION, FailureClass.CONFIG_ERROR, None):
        out += _gcp(text) + _aws(text) + _azure(text)
    if primary in (FailureClass.PIPELINE_ORCHESTRATION, FailureClass.CLOUD_PERMISSIONS_QUOTA, None) or (
            primary is FailureClass.OOM and not out):
        out += _orchestrator(text)
    if primary in (FailureClass.PROCESS_CRASH, FailureClass.CUDA_RUNTIME, FailureClass.NCCL_DISTRIBUTED, None):
        out += _crash_pid(text)
    if primary is FailureClass.CUDA_RUNTIME:
        out += _cuda_stack(text)
        if sig in ("device-side-assert", "illegal-memory-access") or "device-side assert" in decisive:
            out += _launch_blocking(above, tail)
    if primary is FailureClass.CONFIG_ERROR:
        out += _config(sig, decisive, above)
    exc = "\n".join([decisive, *([f"{tb.exc_type}: {tb.message}"] if tb else [])])
    if primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.PIPELINE_ORCHESTRATION, None) and (
            _IMPORT_KIND.search(exc) or "GLIBC" in exc or "pip install" in exc):
        out += _imports(exc)
    if primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT, FailureClass.EVALUATION_MISMATCH,
                   FailureClass.PIPELINE_ORCHESTRATION, None):
        out += _paths("\n".join([decisive, exc, *tail[-6:]]), frames, tail, above, primary)
    if not out and primary in (FailureClass.CONFIG_ERROR, FailureClass.DATA_PIPELINE, FailureClass.IO_CHECKPOINT,
                               FailureClass.EVALUATION_MISMATCH, FailureClass.PIPELINE_ORCHESTRATION):
        # the run's own file, when the log is a local file: a cloud job's source (vertex:..., a tracker's) ran its code elsewhere
        own = _own_line(frames) if d is not None and Path(d.source).is_file() else None
        lib = _library(tb, frames, exc) if primary is FailureClass.CONFIG_ERROR else None
        out += [c for c in (_version_of(lib) if lib else None, own) if c]
    return list(dict.fromkeys(out))


# --- a run that stopped printing -------------------------------------------------------------------

_LOG_PID = lazy(r"\b(?:pid|PID)[: =]+(\d{2,9})\b")


def process_state(facts: list[RunFact], tail: list[str], *, by_name: bool = True) -> list[str]:
    """Is the process still there, and where is it: by the pid the log printed, else by the script that was launched."""
    pid = next((m.group(1) for line in reversed(tail) for m in [_LOG_PID.search(line)] if m), None)
    if pid is not None:
        return [(f"ps -o pid,etime,stat,args -p {pid} && py-spy dump --pid {pid}   # is the process the log names (pid {pid}) still "
                "there, and where each of its threads waits (pip install py-spy; may need sudo)")]
    if not by_name:
        return []
    launch = fact(facts, "launch_command")
    script = re.search(r"(\S+\.py)\b", launch.value) if launch else None
    if script and re.fullmatch(r"[\w./-]{1,200}", script.group(1)):
        s = shlex.quote(script.group(1))
        return [(f"pgrep -a -f {s} && for p in $(pgrep -f {s}); do py-spy dump --pid $p; done   # is the run still there, and where "
                "each of its processes waits (pip install py-spy)")]
    return [("ps -eo pid,etime,stat,args | grep -E '[p]ython|[t]orchrun|[d]eepspeed|[a]ccelerate' | head   # is the run still there "
            "(a stopped log with a live process is a hang: dump its stack with py-spy); none: it was killed, see the job's stderr")]
