"""Which `NAME=value` prefixes of a recorded restart line are refused (they choose the program or code it loads), and which
are shown as sending the run's credentials elsewhere. What a launcher's options set is read in policy/launcher_options.py,
what the run folder's files set in policy/folder_routes.py.

A restart runs a recorded command after the person accepts the question that shows it; a variable in front of it can
still choose the program that runs or code it loads before the script (`PATH=`, `LD_PRELOAD=`, `OPENSSL_CONF=`,
`GIT_PYTHON_GIT_EXECUTABLE=`), which the line does not say. The list has grown every red-team round, so it lives here,
apart from how an action is prepared and run (`policy/actions.py`).
"""

from __future__ import annotations

import re

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
# external-account key file names (the switch is refused); and since the fifty-ninth round `GOOGLE_APPLICATION_CREDENTIALS` itself: an external-account key
# file's `credential_source` reads any file of the server and sends it to the `token_url` it names;
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
                          r"AWS_CONFIG_FILE|AWS_SHARED_CREDENTIALS_FILE|GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES|GOOGLE_APPLICATION_CREDENTIALS|KUBECONFIG|"
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
    r"NCCL_(?!\w*(?:FILE|PATH|DIR|LIB|PLUGIN|NETS?\b))\w+|GLOO_SOCKET_IFNAME|TP_SOCKET_IFNAME|"
    r"MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|NODE_RANK|GROUP_RANK|LOCAL_WORLD_SIZE|NNODES|NPROC_PER_NODE|GPUS_PER_NODE|"
    r"NUM_GPUS|N_GPUS|PET_(?:NPROC_PER_NODE|NNODES|NODE_RANK|MASTER_ADDR|MASTER_PORT|RDZV_(?:ENDPOINT|ID|BACKEND)|MAX_RESTARTS|MONITOR_INTERVAL|STANDALONE|"
    r"LOCAL_ADDR|REDIRECTS|TEE|ROLE)|"
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
    r"DISABLED|RESUME|START_METHOD|INIT_TIMEOUT|HTTP_TIMEOUT|DISABLE_CODE|DISABLE_GIT|IGNORE_GLOBS)|"
    # not WANDB_CACHE_DIR, WANDB_DATA_DIR, WANDB_ARTIFACT_DIR: wandb serves a cached artifact file by its size alone, so a
    # folder the line names could hand the script planted bytes for an artifact it downloads (forty-ninth round, a gap)
    r"MLFLOW_(?:TRACKING_USERNAME|TRACKING_PASSWORD|TRACKING_TOKEN|EXPERIMENT_NAME|EXPERIMENT_ID|RUN_ID|"
    r"HTTP_REQUEST_TIMEOUT|HTTP_REQUEST_MAX_RETRIES|ENABLE_SYSTEM_METRICS_LOGGING)|COMET_(?:API_KEY|PROJECT_NAME|WORKSPACE|"
    r"MODE|OFFLINE_DIRECTORY)|NEPTUNE_(?:API_TOKEN|PROJECT|MODE)|"
    r"HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HF_HUB_OFFLINE|TRANSFORMERS_OFFLINE|HF_DATASETS_OFFLINE|HF_HUB_ENABLE_HF_TRANSFER|"
    r"HF_HUB_DISABLE_\w+|HF_HUB_DOWNLOAD_TIMEOUT|HF_HUB_ETAG_TIMEOUT|TRANSFORMERS_VERBOSITY|TRANSFORMERS_NO_ADVISORY_WARNINGS|"
    r"DATASETS_VERBOSITY|HF_HUB_VERBOSITY|HF_DATASETS_IN_MEMORY_MAX_SIZE|"
    r"ACCELERATE_LOG_LEVEL|ACCELERATE_DEBUG_MODE|ACCELERATE_GRADIENT_ACCUMULATION_STEPS|"
    r"ACCELERATE_USE_(?:FSDP|CPU|MPS_DEVICE)|DS_ACCELERATOR|DS_SKIP_CUDA_CHECK|"
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


def sends_elsewhere(names: list[str]) -> list[str]:
    """Of the variables a recorded line sets, those that send the run's credentials or traffic to a host it names."""
    return sorted({n for n in names if _ROUTE_ENV.match(n)})
