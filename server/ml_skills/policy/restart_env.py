"""Which `NAME=value` prefixes of a recorded restart line are refused, and which variables a launcher's own options
(`mpirun -x`, `srun --export=`) may not set for the program it starts.

A restart runs a recorded command after the person accepts the question that shows it; a variable in front of it can
still choose the program that runs or code it loads before the script (`PATH=`, `LD_PRELOAD=`, `OPENSSL_CONF=`,
`GIT_PYTHON_GIT_EXECUTABLE=`), which the line does not say. The list has grown every red-team round, so it lives here,
apart from how an action is prepared and run (`policy/actions.py`).
"""

from __future__ import annotations

import configparser
import os
import re
import stat

from ml_skills.policy.quoting import quoted

# Variables that choose which program runs or what it loads before it starts: set from a recorded
# line, they turn "python train.py" into any program (PATH=/elsewhere python, LD_PRELOAD=evil.so).
# PET_NO_PYTHON is torchrun's --no-python given through the environment (torchrun reads PET_<OPTION>).
# The `python` on the server's PATH can be a version manager's shim (pyenv, asdf, mise), a script that picks
# the program from its own variables: PYENV_VERSION=../../run/env runs any file named python (pyenv does not
# check it for `..`), PYENV_HOOK_PATH makes the shim source any bash. PYTHONUSERBASE and PYTHONPLATLIBDIR move
# the site and library folders whose .pth files and modules load before the script.
# HOME moves the user site folder (~/.local/lib/pythonX.Y/site-packages, whose .pth files run at start-up) and a version
# manager's own folder, like PYTHONUSERBASE; GCONV_PATH and NCCL's plugin variables name libraries to load, like LD_PRELOAD.
# Libraries read their own variables as the script imports them: OPENSSL_CONF names a config whose provider or engine
# module is a shared library OpenSSL loads when `ssl` starts (every HTTP client imports it); before the tenth round
# `OPENSSL_CONF=ssl.cnf python train.py` ran a library planted in the run folder after an accept. So are refused:
# OpenSSL's variables, any variable naming a plugin (NCCL's, Qt's, GStreamer's, PYTEST_PLUGINS), the OpenMP and GPU
# loaders' tool and driver libraries (OMP_TOOL_LIBRARIES, *_ICD_*, VK_*LAYER*, __EGL_*, LIBGL_*), Open MPI / PMIx component
# paths and parameter files (OMPI_MCA_mca_base_component_path; OMPI_MCA_btl=^openib still runs), module folders (GIO_MODULE_DIR, UCX_MODULE_DIR) and the programs a JIT compiler runs (CC, CXX, NVCC,
# Triton's tool and libcuda paths).
# Programs a library the script imports starts, and libraries a driver loads (eleventh round): GitPython runs
# GIT_PYTHON_GIT_EXECUTABLE as soon as it is imported, and `wandb.init` imports it, so before this round
# `GIT_PYTHON_GIT_EXECUTABLE=./x python train.py` ran ./x after an accept. So are refused: git's own variables (GIT_SSH_COMMAND,
# GIT_EXEC_PATH, GIT_CONFIG_*), any *EXECUTABLE* / *_PYTHON / *_COMMAND / *ASKPASS* variable and the editor, pager and browser; the
# CUDA and NVTX injection libraries (CUDA_INJECTION64_PATH), tool and device libraries (HSA_TOOLS_LIB, TPU_LIBRARY_PATH,
# TF_PLUGGABLE_DEVICE_LIBRARY, PJRT_NAMES_AND_LIBRARY_PATHS), libfabric's FI_PROVIDER_PATH; and the folders gcc takes
# its own programs and headers from (COMPILER_PATH=. runs ./cc1plus when torch.compile builds a C++ kernel). And the
# variables that move a folder code is loaded from without naming it: TMPDIR=. or USER=bob moves torch inductor's kernel
# cache (`$TMPDIR/torchinductor_$USER`), XDG_CACHE_HOME the Hub's remote-code modules, XDG_CONFIG_HOME matplotlib's
# config (its backend is a module); the tenth round listed them as shown, but the line does not say what they move.
# Twelfth round: the toolkit folders whose programs torch's extension builds and Triton run (CUDA_HOME=. runs ./bin/nvcc;
# the eleventh round listed it as shown), TRITON_HOME (moves Triton's kernel cache without naming it), Tcl's package path
# (tkinter), NCCL's config file (a file of NCCL variables, its plugins among them), and the programs and options of the
# other runtimes a library starts: Java (PySpark runs $SPARK_HOME/bin/spark-submit, then $JAVA_HOME/bin/java, and
# JAVA_TOOL_OPTIONS=-agentpath:./x.so loads a library into it), node, perl and ruby (their option and module variables).
# Fourteenth round: bash's own variables. The `python` on PATH can be a pyenv shim, a bash script, and bash reads options
# and prompts from its environment: `SHELLOPTS=xtrace PS4='\044\050touch\040x\051' python train.py` turns on tracing, and
# the trace prompt, its octal escapes decoded (no `$` in the line for the expansion check to see), is expanded with command
# substitution before each line of the shim: the command ran (as any user but root, whom bash denies an inherited PS4).
# So SHELLOPTS, BASHOPTS, the prompts, PROMPT_COMMAND, any BASH_* and the search and ignore lists are refused.
# Fifteenth round: a config file a cloud client reads can name a program it runs for credentials, and a few libraries name
# their programs without the words above. `AWS_CONFIG_FILE=./aws.cfg` (its `credential_process = ./x`) made botocore run ./x
# as the script asked for credentials; `GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1` lets google-auth run the command an
# external-account key file names (`GOOGLE_APPLICATION_CREDENTIALS` still picks a key file: the switch is refused);
# KUBECONFIG can name an exec plugin; `CONDA_EXE=./x TORCH_INDUCTOR_INSTALL_GXX=1` made torch.compile run ./x on a CPU;
# `PYTORCH_NVCC` and `CUDACXX` name the nvcc torch's extension builds and inductor run. So the credential files, the switch,
# KUBECONFIG, any *_EXE and *_BINARY and any name holding NVCC are refused.
# Seventeenth round: a launcher's own variables that do what its refused options do. srun reads `SLURM_TASK_PROLOG` (and
# the other prologs and epilogs) as `--task-prolog`, and `SLURM_EXPORT_ENV` / `SRUN_EXPORT_ENV` as `--export`:
# `SLURM_EXPORT_ENV=ALL,LD_PRELOAD=./x.so srun python train.py` set what `--export=ALL,LD_PRELOAD=...` may not. Open MPI reads
# `OMPI_MCA_mca_base_env_list` (variables for the ranks), `*_MCA_*agent*` / `*launch*` (the program that reaches the nodes) and
# `OPAL_PREFIX` (where its components load from); MPICH and Intel MPI's hydra `*_EXEC` (the bootstrap program).
_PROGRAM_ENV = re.compile(r"^(PATH|HOME|LD_\w+|DYLD_\w+|GCONV_PATH|\w*PLUGIN\w*|BASH_ENV|ENV|"
                          r"SHELL|IFS|SHELLOPTS|BASHOPTS|PS[0-4]|PROMPT_COMMAND|BASH_\w+|CDPATH|GLOBIGNORE|EXECIGNORE|PET_NO_PYTHON|PYENV_\w*|ASDF_\w*|MISE_\w*|RTX_\w*|RBENV_\w*|NODENV_\w*|GOENV_\w*|"
                          r"OPENSSL_\w+|OMP_TOOL\w*|\w*_ICD_\w*|VK_\w*LAYER\w*|__EGL_\w*|LIBGL_\w*|\w*_MCA_\w*(?:path|file|dir|prefix)\w*|\w*MODULE_DIR\w*|"
                          r"CC|CXX|\w*NVCC\w*|CUDAHOSTCXX|CUDACXX|HIPCXX|TRITON_\w*_PATH|\w*_EXE|\w*_BINARY|"
                          r"AWS_CONFIG_FILE|AWS_SHARED_CREDENTIALS_FILE|GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES|KUBECONFIG|"
                          r"GIT_\w+|\w*EXECUTABLE\w*|\w+_PYTHON|\w*_COMMAND|\w*ASKPASS\w*|EDITOR|VISUAL|PAGER|BROWSER|"
                          r"\w*INJECTION\w*|\w*_LIB|(?:\w*_)?LIBRARY(?:_PATHS?)?|\w*PROVIDER_PATH\w*|"
                          r"COMPILER_PATH|GCC_EXEC_PREFIX|CPATH|C_INCLUDE_PATH|CPLUS_INCLUDE_PATH|OBJC_INCLUDE_PATH|"
                          r"TMPDIR|TMP|TEMP|TEMPDIR|USER|LOGNAME|USERNAME|XDG_\w+_HOME|"
                          r"CUDA_HOME|CUDA_PATH|CUDA_ROOT|ROCM_HOME|ROCM_PATH|HIP_PATH|TRITON_HOME|TCLLIBPATH|NCCL_CONF_FILE|"
                          r"JAVA_HOME|SPARK_HOME|HADOOP_HOME|\w*JAVA_OPTIONS|JAVA_TOOL_OPTIONS|NODE_OPTIONS|NODE_PATH|PERL5\w*|PERLLIB|RUBYOPT|RUBYLIB|"
                          r"\w*_EXEC|\w*PROLOG\w*|\w*EPILOG\w*|S(?:LURM|RUN)_EXPORT_ENV|\w*_MCA_\w*(?:env|agent|launch)\w*|OPAL_\w*(?:PREFIX|DIR))$")
# Python's own variables are read before the script: a new one can pick what loads (PYTHONPYCACHEPREFIX names the folder
# cached bytecode of the standard library is read from; before the ninth round `PYTHONPYCACHEPREFIX=.c python train.py`
# ran a planted json.pyc after an accept). Only these, which tune the interpreter and load nothing, may be set; PYTHONPATH
# is shown to the person, who judges the folders it adds.
_PYTHON_ENV_OK = frozenset({
    "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "PYTHONFAULTHANDLER",
    "PYTHONOPTIMIZE", "PYTHONUTF8", "PYTHONDEVMODE", "PYTHONTRACEMALLOC", "PYTHONWARNINGS", "PYTHONNOUSERSITE", "PYTHONSAFEPATH",
    "PYTHONVERBOSE", "PYTHONDEBUG", "PYTHONMALLOC", "PYTHONNODEBUGRANGES", "PYTHONINTMAXSTRDIGITS", "PYTHONPROFILEIMPORTTIME",
    "PYTHONASYNCIODEBUG", "PYTHONCOERCECLOCALE", "PYTHON_CPU_COUNT", "PYTHON_GIL",
})


# Thirty-ninth round: `TORCH_HOME=cache python train.py` made torch.hub import a hubconf.py planted under
# cache/hub/ after an accept, and a dozen more cache and config folders (HF_HOME, TORCH_EXTENSIONS_DIR, NUMBA_CACHE_DIR,
# MPLCONFIGDIR...) were as open: thirty-eight rounds of refusing names one by one had not closed the family. A recorded
# line may now set only the variables below, known to tune a run (devices, threads, the rendezvous, logging, trackers and
# hubs by token, endpoint and offline switches) and never to name a folder code is loaded from, plus the routes the
# question shows (`_ROUTE_ENV`); the refused names above stay refused even where a pattern here would take them.
_TUNING_ENV = re.compile(
    r"^(CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|CUDA_LAUNCH_BLOCKING|CUDA_DEVICE_MAX_CONNECTIONS|CUDA_MODULE_LOADING|CUDA_CACHE_DISABLE|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|HIP_LAUNCH_BLOCKING|ASCEND_RT_VISIBLE_DEVICES|NPU_VISIBLE_DEVICES|TPU_VISIBLE_CHIPS|"
    r"NCCL_(?!\w*(?:FILE|PATH|DIR|LIB|PLUGIN|NET\b))\w+|GLOO_SOCKET_IFNAME|TP_SOCKET_IFNAME|"
    r"MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|NODE_RANK|GROUP_RANK|LOCAL_WORLD_SIZE|NNODES|NPROC_PER_NODE|GPUS_PER_NODE|"
    r"NUM_GPUS|N_GPUS|PET_(?:NPROC_PER_NODE|NNODES|NODE_RANK|MASTER_ADDR|MASTER_PORT|RDZV_\w+|MAX_RESTARTS|MONITOR_INTERVAL|STANDALONE|"
    r"LOCAL_ADDR|LOGS_SPECS|REDIRECTS|TEE|ROLE)|"
    # not TORCH_LOGS: a name it does not know is imported as a module, from the run folder first (forty-first round)
    r"TORCH_DISTRIBUTED_DEBUG|TORCH_NCCL_\w+|TORCH_CPP_LOG_LEVEL|TORCH_SHOW_CPP_STACKTRACES|TORCH_USE_CUDA_DSA|"
    r"TORCH_CUDNN_V8_API_\w+|TORCH_ALLOW_TF32_CUBLAS_OVERRIDE|TORCH_DISABLE_ADDR2LINE|TORCH_FR_BUFFER_SIZE|"
    r"PYTORCH_CUDA_ALLOC_CONF|PYTORCH_HIP_ALLOC_CONF|PYTORCH_NO_CUDA_MEMORY_CACHING|PYTORCH_ENABLE_MPS_FALLBACK|"
    r"PYTORCH_MPS_HIGH_WATERMARK_RATIO|PYTORCH_NVML_BASED_CUDA_CHECK|"
    r"OMP_NUM_THREADS|OMP_PROC_BIND|OMP_PLACES|OMP_WAIT_POLICY|KMP_AFFINITY|KMP_BLOCKTIME|MKL_NUM_THREADS|MKL_SERVICE_FORCE_INTEL|"
    r"MKL_THREADING_LAYER|OPENBLAS_NUM_THREADS|NUMEXPR_NUM_THREADS|NUMEXPR_MAX_THREADS|VECLIB_MAXIMUM_THREADS|TOKENIZERS_PARALLELISM|"
    r"TF_CPP_MIN_LOG_LEVEL|TF_CPP_MAX_VLOG_LEVEL|TF_FORCE_GPU_ALLOW_GROWTH|TF_ENABLE_ONEDNN_OPTS|TF_GPU_ALLOCATOR|"
    r"TF_DETERMINISTIC_OPS|TF_CUDNN_DETERMINISTIC|TF_GPU_THREAD_MODE|XLA_PYTHON_CLIENT_(?:PREALLOCATE|MEM_FRACTION|ALLOCATOR)|"
    r"JAX_PLATFORMS|JAX_PLATFORM_NAME|JAX_ENABLE_X64|JAX_TRACEBACK_FILTERING|JAX_DEBUG_NANS|JAX_DISABLE_JIT|"
    r"WANDB_(?:API_KEY|PROJECT|ENTITY|NAME|RUN_ID|RUN_GROUP|JOB_TYPE|TAGS|NOTES|MODE|SILENT|QUIET|CONSOLE|WATCH|LOG_MODEL|"
    r"DISABLED|RESUME|START_METHOD|INIT_TIMEOUT|HTTP_TIMEOUT|DISABLE_CODE|DISABLE_GIT|IGNORE_GLOBS|CACHE_DIR|DATA_DIR|"
    r"ARTIFACT_DIR)|MLFLOW_(?:TRACKING_USERNAME|TRACKING_PASSWORD|TRACKING_TOKEN|EXPERIMENT_NAME|EXPERIMENT_ID|RUN_ID|"
    r"HTTP_REQUEST_TIMEOUT|HTTP_REQUEST_MAX_RETRIES|ENABLE_SYSTEM_METRICS_LOGGING)|COMET_(?:API_KEY|PROJECT_NAME|WORKSPACE|"
    r"MODE|OFFLINE_DIRECTORY)|NEPTUNE_(?:API_TOKEN|PROJECT|MODE)|"
    r"HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|HF_DATASETS_OFFLINE|HF_HUB_ENABLE_HF_TRANSFER|"
    r"HF_HUB_DISABLE_\w+|HF_HUB_DOWNLOAD_TIMEOUT|HF_HUB_ETAG_TIMEOUT|TRANSFORMERS_VERBOSITY|TRANSFORMERS_NO_ADVISORY_WARNINGS|"
    r"DATASETS_VERBOSITY|HF_HUB_VERBOSITY|HF_DATASETS_IN_MEMORY_MAX_SIZE|"
    r"ACCELERATE_MIXED_PRECISION|ACCELERATE_LOG_LEVEL|ACCELERATE_DEBUG_MODE|ACCELERATE_GRADIENT_ACCUMULATION_STEPS|"
    r"ACCELERATE_USE_(?:FSDP|DEEPSPEED|CPU|MPS_DEVICE)|DS_ACCELERATOR|DS_SKIP_CUDA_CHECK|"
    # a launcher's own tuning, by name (fortieth round: `OMPI_MCA_plm_rsh_args=-oProxyCommand=./x` passed as "OMPI_MCA_*" and
    # made the ssh Open MPI starts run ./x; `SLURM_CONTAINER=./bundle` runs the step in a bundle whose python is any program)
    r"OMPI_MCA_(?:btl|btl_tcp_if_include|btl_tcp_if_exclude|btl_openib_allow_ib|btl_vader_single_copy_mechanism|pml|mtl|osc|coll|"
    r"coll_hcoll_enable|hwloc_base_binding_policy|rmaps_base_mapping_policy|rmaps_base_oversubscribe|mpi_warn_on_fork|"
    r"orte_base_help_aggregate|oob_tcp_if_include|oob_tcp_if_exclude|mpi_cuda_support|opal_cuda_support|mpi_yield_when_idle)|"
    r"HOROVOD_(?:FUSION_THRESHOLD|CYCLE_TIME|CACHE_CAPACITY|HIERARCHICAL_ALLREDUCE|HIERARCHICAL_ALLGATHER|LOG_LEVEL|GLOO_IFACE|"
    r"MPI_THREADS_DISABLE|AUTOTUNE|STALL_CHECK_DISABLE|STALL_CHECK_TIME_SECONDS|STALL_SHUTDOWN_TIME_SECONDS|GPU_OPERATIONS|"
    r"GPU_ALLREDUCE|GPU_ALLGATHER|GPU_BROADCAST|CPU_OPERATIONS|NUM_NCCL_STREAMS|BATCH_D2D_MEMCOPIES|ENABLE_ASYNC_COMPLETION)|"
    r"SLURM_(?:CPUS_PER_TASK|NTASKS|NTASKS_PER_NODE|NNODES|JOB_NAME|MEM_PER_CPU|MEM_PER_GPU|MEM_PER_NODE|GPUS|GPUS_PER_NODE|"
    r"GPUS_PER_TASK|CPU_BIND|DISTRIBUTION|OVERCOMMIT|EXCLUSIVE|TIMELIMIT|PARTITION|ACCOUNT|QOS|GRES|HINT|THREADS_PER_CORE|"
    r"UNBUFFEREDIO|WAIT|KILL_BAD_EXIT)|SRUN_CPUS_PER_TASK|NO_PROXY|no_proxy|"
    r"AWS_PROFILE|AWS_REGION|AWS_DEFAULT_REGION|AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|"
    r"GOOGLE_APPLICATION_CREDENTIALS|GOOGLE_CLOUD_PROJECT|GCLOUD_PROJECT|CLOUDSDK_CORE_PROJECT|"
    r"LANG|LANGUAGE|LC_\w+|TZ|TERM|COLUMNS|LINES|NO_COLOR|FORCE_COLOR|CLICOLOR)$")


def picks_the_program(name: str) -> bool:
    """A variable that chooses the program that runs or code it loads, or one not known to be safe to set: a recorded
    line may set only the variables `_TUNING_ENV` names and the routes the question shows."""
    return bool(_PROGRAM_ENV.match(name)) or (name.startswith("PYTHON") and name not in _PYTHON_ENV_OK) or not (
        name.startswith("PYTHON") or _TUNING_ENV.match(name) or _ROUTE_ENV.match(name))


_ENV_OPTIONS = {"-x", "-genv", "-env", "--env", "--export", "-export"}  # Open MPI, MPICH/Intel MPI hydra, srun
# options that set a launcher's own variable under another spelling: Open MPI's `--mca NAME VALUE` is OMPI_MCA_NAME, srun's
# `--container=PATH` is SLURM_CONTAINER (fortieth round: both were admitted in option form)
# (forty-first round: PRRTE's `--prtemca`, PMIx's `--pmixmca` and pyxis' `--container-image` were admitted: any option
# ending in `mca` is read as its family's variable, and any srun option starting with `--container` as SLURM_CONTAINER)
_MCA_OPTION = re.compile(r"^--?(\w*)mca$")
_MCA_FAMILY = {"": "OMPI", "g": "OMPI", "o": "OMPI", "prte": "PRTE", "pmix": "PMIX"}
# Options that read the launcher's settings, variables or programs from a file the question does not show: srun's
# `--export-file`, Open MPI's `--tune` (`-x NAME=V` lines among MCA parameters), `--am` (MCA parameter files) and `--app` (an
# appfile: the programs to start), hydra's `-configfile` (seventeenth round: only `--export-file` was refused).
_FILE_OPTIONS = {"export-file", "tune", "am", "app", "configfile"}


def launcher_env(opts: list[str]) -> list[str]:
    """Variables srun, mpirun or horovodrun would set, from its options, for the program it starts (`mpirun -x NAME=V`,
    `srun --export=ALL,NAME=V`, `mpirun -genv NAME V`) that choose what runs or loads; an option that reads them from a
    file the question does not show (`--export-file`, `--tune`, `--am`, `--app`, `-configfile`) counts as one. Before the ninth round only a line's leading NAME=V was
    checked: `mpirun -np 1 -x PYTHONPYCACHEPREFIX=.c python train.py` loaded planted bytecode after an accept."""
    bad = sorted({w.split("=", 1)[0] for w in opts if _reads_a_file(w)})
    return sorted(set(bad + [n for n in _names_set(opts) if picks_the_program(n)]))


def _reads_a_file(word: str) -> bool:
    return word.startswith("-") and word.split("=", 1)[0].lstrip("-").replace("_", "-") in _FILE_OPTIONS


def _names_set(opts: list[str]) -> list[str]:
    """The variable names a launcher's options set (`-x NAME=V`, `--export=ALL,NAME=V`, `-genv NAME V`, `--mca NAME V`,
    srun's `--container=PATH`)."""
    names: list[str] = []
    for i, w in enumerate(opts):
        if _reads_a_file(w):
            continue
        if i > 0 and (m := _MCA_OPTION.match(opts[i - 1])):
            names.append(f"{_MCA_FAMILY.get(m.group(1), m.group(1).upper())}_MCA_{w}")
            continue
        if w.startswith("--container"):
            names.append("SLURM_CONTAINER")
            continue
        value = w.split("=", 1)[1] if w.startswith("-") and "=" in w else w
        names += [x.split("=", 1)[0] for x in value.split(",") if "=" in x]
        if i > 0 and opts[i - 1] in _ENV_OPTIONS:
            names.append(w.split("=", 1)[0])
    return names


# Variables that send the run's credentials and data to another host without loading any code: a tracker's or hub's base URL
# (`WANDB_BASE_URL=https://elsewhere` sends the W&B key there, `HF_ENDPOINT` the Hugging Face token), a proxy, and a CA bundle
# that lets a proxy read TLS traffic. A self-hosted W&B or a cluster's proxy sets them for good reasons, so they are not
# refused; the fourteenth round left them to a person reading the whole command. Since the fifteenth the question's
# "Expected impact" names them, so a person skimming `python train.py` at the end of a long line is told.
# Seventeenth round, names the list missed: botocore's per-service `AWS_ENDPOINT_URL_S3`, Comet's `COMET_URL_OVERRIDE`, gRPC's
# `GRPC_PROXY` (any `*_PROXY` but `NO_PROXY`) and its CA file `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`, `WANDB_CONFIG_DIR` (the folder
# whose `settings` names the W&B server: wandb 0.31 took `base_url` from `./c/settings`), torch's `MASTER_ADDR` (the host the
# ranks exchange weights and gradients with), and what lets a host on the way read the traffic: `SSLKEYLOGFILE` (the TLS
# keys of every connection, written to a file) and a switch that turns certificate checks off (`WANDB_INSECURE_DISABLE_SSL`).
# Twenty-first round: `WANDB_SERVICE` names the wandb-core service (a Unix socket's path, or a localhost port) the run's wandb
# hands its settings to, the W&B key among them: a socket in the run folder got the key (wandb 0.31).
_ROUTE_ENV = re.compile(r"(?i)^(?:WANDB_SERVICE|\w*_BASE_URL|\w*_ENDPOINT(?:_URL(?:_\w+)?)?|\w*_API_(?:URL|BASE|HOST)|\w*_HOST|\w*TRACKING_URI|\w*REGISTRY_URI|"
                        r"\w*_URL_OVERRIDE|(?!NO_)\w*_PROXY|\w*_CA_BUNDLE|SSL_CERT_(?:FILE|DIR)|\w*_CA_CERTS?|\w*SSL_ROOTS\w*|"
                        r"WANDB_CONFIG_DIR|SSLKEYLOGFILE|\w*DISABLE_SSL\w*|\w*INSECURE\w*)$")
# torchrun's rendezvous and master host (also deepspeed's and torch.distributed.launch's), given as options: the ranks
# exchange the model's weights and gradients with whatever joins there. Loopback names the machine itself.
_RENDEZVOUS = {"--rdzv_endpoint": 8, "--master_addr": 10}  # also argparse's unambiguous prefixes (`--rdzv-e`, `--master_a`)
_RENDEZVOUS_ENV = ("MASTER_ADDR", "PET_RDZV_ENDPOINT", "PET_MASTER_ADDR")  # torchrun reads PET_<OPTION> as its option
_LOCAL = re.compile(r"^(?:localhost|127(?:\.\d{1,3}){3}|\[?::1\]?)(?::\d+)?$")


def sends_elsewhere(names: list[str]) -> list[str]:
    """Of the variables a recorded line sets, those that send the run's credentials or traffic to a host it names."""
    return sorted({n for n in names if _ROUTE_ENV.match(n)})


def rendezvous(argv: list[str], env: dict[str, str]) -> list[str]:
    """The rendezvous or master host options of a recorded line (`--rdzv-endpoint evil:29400`, `--master_addr=...`, any
    prefix torchrun's argparse takes for them) and the variables that set them (`MASTER_ADDR`, torchrun's `PET_RDZV_ENDPOINT`),
    when they name another machine (one a launcher's option sets is named whatever it holds): before the seventeenth round the
    question named none."""
    found = [n for n in _RENDEZVOUS_ENV if not _LOCAL.match(env.get(n, "localhost"))]
    found += [n for n in _RENDEZVOUS_ENV if n in set_by_launcher(argv) and n not in found]
    for i, w in enumerate(argv):
        opt, eq, value = w.partition("=")
        name = "--" + opt[2:].replace("-", "_") if opt.startswith("--") else opt
        if not any(len(name) >= least and full.startswith(name) for full, least in _RENDEZVOUS.items()):
            continue
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if not _LOCAL.match(value):
            found.append(opt)
    return found


_STARTS_ANY = {"srun", "mpirun", "horovodrun"}
_PYTHON_LAUNCHER = re.compile(r"^(python(\d+(\.\d+)?)?|torchrun|deepspeed|accelerate)$")


def set_by_launcher(argv: list[str]) -> list[str]:
    """Every variable srun, mpirun or horovodrun sets, through its options, for the Python launcher it starts
    (`mpirun -x HTTPS_PROXY=...`, `srun --export=ALL,WANDB_BASE_URL=...`): the question names those that send the run's
    credentials elsewhere, as it names a line's leading ones (sixteenth round: only those were named)."""
    if not argv or os.path.basename(argv[0]) not in _STARTS_ANY:
        return []
    inner = next((i for i, w in enumerate(argv[1:], 1) if _PYTHON_LAUNCHER.match(os.path.basename(w))), len(argv))
    return _names_set(argv[1:inner])


MAX_SETTINGS_BYTES = 64 * 1024


def _read_in_folder(dfd: int, parts: tuple[str, ...]) -> bytes | str | None:
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
    raw = _read_in_folder(dfd, (".wandb" if dot else "wandb", "settings"))
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
    while the question named nothing): the names, or a note as `_read_in_folder` gives it; None when it sets none."""
    raw = _read_in_folder(dfd, (".env",))
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
