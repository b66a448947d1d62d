"""Native and device crashes: the core and kernel line of a process that died by signal, the CUDA stack a
cuDNN/cuBLAS error names, a synchronous rerun for a device-side assert.
"""

from __future__ import annotations

import shlex

from ml_skills.engine.plan.probes.exceptions import LIBRARY_PATH
from ml_skills.engine.plan.probes.memory import JAX
from ml_skills.lazyre import lazy

_MODULE_SCRIPT = lazy(r'File "([^"\n]{1,300}\.py)", line \d+, in <module>')


def launch_blocking(above: list[str], tail: list[str]) -> list[str]:
    """A device-side assert is reported at a later, unrelated call: a synchronous rerun of the script puts it at the op."""
    script = next((m.group(1) for line in [*above, *tail] if (m := _MODULE_SCRIPT.search(line))), None)
    if script is None or LIBRARY_PATH.search(script):
        return []
    return [(f"CUDA_LAUNCH_BLOCKING=1 python {shlex.quote(script)}   # with the run's own arguments: kernels run one at a time, so the "
            "traceback stops at the op whose index is out of range")]


_CRASH_PID = lazy(r"exitcode: -(\d{1,2})\)? local_rank: \d+ \(pid: (\d{1,9})\)|SIG\w{2,6} \(@0x[0-9a-f]+\) received by PID (\d{1,9})")


def crash_pid(text: str) -> list[str]:
    if (m := _CRASH_PID.search(text)) is None:
        return []
    pid = m.group(2) or m.group(3)
    return [(f"coredumpctl info --no-pager {pid} | head -60; dmesg -T | grep -E '\\[{pid}\\]|pid {pid}\\b' | tail -3"
            f"   # the native stack of the process that died (pid {pid}) if systemd-coredump kept its core, and the kernel's line for it")]


_CUDA_LIB = lazy(r"(?i)CUDNN_STATUS_\w+|cuDNN error|CUBLAS_STATUS_\w+|CUBLAS failure|the library was not initialized|"
                 r"could not create cudnn handle")
_TF = lazy(r"tensorflow|\bTF\b|stream_executor")


def cuda_stack(text: str) -> list[str]:
    if not _CUDA_LIB.search(text):
        return []
    if JAX.search(text) or "XLA" in text:
        return [("nvidia-smi; python -c 'import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())'"
                "   # driver and the CUDA build JAX loaded")]
    if _TF.search(text):
        return [("nvidia-smi; python -c 'import tensorflow as tf; print(tf.__version__, tf.sysconfig.get_build_info())'"
                "   # driver, and the CUDA and cuDNN versions this TensorFlow was built for")]
    return [("nvidia-smi; python -c \"import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), "
            "torch.cuda.get_arch_list())\"   # driver, and the CUDA and cuDNN this torch build ships, and the GPUs it supports")]
