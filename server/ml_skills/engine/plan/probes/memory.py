"""Where memory ran out (a GPU, a TPU's HBM, the host or container, /dev/shm, a scheduler's limit), and the
launch with half the batch.
"""

from __future__ import annotations

import re
import shlex

from ml_skills.lazyre import lazy

_GPU_OOM = lazy(r"(?i)CUDA out of memory|OutOfMemoryError: CUDA|CUDA error: out of memory|cudaMalloc failed|"
                r"cudaSuccess \(2 vs\. 0\)|Cuda failure (?:2 )?'out of memory'|out of memory error on GPU|device:GPU:\d|GPU_\d+_bfc|"
                r"CUBLAS_STATUS_ALLOC_FAILED|on device ordinal \d|"
                # CNTK's and CuPy's (Chainer's) own wordings of a failed device allocation
                r"CUDA failure 2: out of memory|out of memory to allocate \d+ bytes \(total \d+ bytes\)")
_TPU_OOM = lazy(r"(?i)\bhbm\b|XLA:TPU|\bTPU\b|Attempting to reserve [\d.]+\w at the bottom of memory")
_TORCH_XLA = lazy(r"torch_xla|xla_util\.cc|xla_client")
JAX = lazy(r"jaxlib|\bjax\b|XlaRuntimeError")
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


def memory(sig: str | None, text: str) -> list[str]:
    """Where the memory ran out decides the fix: a GPU, a TPU's HBM, the host or container, shared memory, a scheduler's limit."""
    if sig == "shm-exhausted" or re.search(r"(?i)shared memory \(shm\)|out of shared memory", text):
        return [("df -h /dev/shm   # the shared memory DataLoader workers pass batches through (a container's default is 64M: "
                "docker run --shm-size, or an emptyDir with medium: Memory on Kubernetes)")]
    if sig == "windows-paging-file" or "WinError 1455" in text:
        return [("powershell -Command \"Get-CimInstance Win32_PageFileUsage | Format-List Name,AllocatedBaseSize,CurrentUsage\""
                "   # the paging file's size: each DataLoader worker maps the CUDA DLLs into it")]
    if "device:CPU" in text:
        return [_HOST_MEMORY]
    if "MPS backend out of memory" in text:  # Apple silicon: the GPU shares the Mac's unified memory
        return [("python -c 'import torch; print(torch.mps.recommended_max_memory() / 2**30, torch.mps.driver_allocated_memory() / 2**30)'"
                 "   # on the Mac the run used: the GiB the MPS backend may use (PYTORCH_MPS_HIGH_WATERMARK_RATIO scales it) and "
                 "the GiB its driver holds now; every other app shares the same memory")]
    if (_GPU_OOM.search(text) or sig == "tf-oom-allocating") and not _TPU_OOM.search(text):
        out = [_GPU_MEMORY]
        if JAX.search(text):
            out.append("echo \"XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE-unset} "
                       "XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION-unset}\""
                       "   # JAX takes 75% of the GPU at start unless these say otherwise")
        return out
    if sig == "xla-oom" or _TPU_OOM.search(text) or ("RESOURCE_EXHAUSTED" in text and JAX.search(text)):
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


_BATCH_FLAG = lazy(r"^--(?:per[-_]device[-_]train[-_])?(?:train[-_])?(?:micro[-_])?batch[-_]size$")


def smaller_batch_command(launch: str | None) -> str | None:
    """The run's launch command with its batch-size flag halved (shlex-joined words), or None when it has none."""
    from ml_skills.engine.plan.launch import launch_words

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
