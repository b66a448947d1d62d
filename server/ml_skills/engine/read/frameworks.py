"""Which framework wrote a log, from markers read where a framework shows itself, and its terminal traceback.

The head of a log names its framework (imports, banners, config dumps, launcher lines), and so do its
tracebacks' file paths and its tail; the chunks in between are step lines. The markers are read there
only, not in every chunk: `[rankN]:` and `torch.` are on every line of some logs, and in the main
signature database these markers cost a quarter of its time. A log of up to three chunks is read for
them whole.

`decide` weighs the evidence in layers, because a log holds several libraries' lines: a platform that
ran the job (Kubeflow, Vertex AI, Ray, SageMaker) names it first; under it, the base library is the one
whose frames raised the terminal exception (a PyTorch traceback after TensorFlow's start-up lines is
PyTorch), else the one with most marked chunks, start-up lines of a library imported on the side
counting only when nothing else is named; a wrapper of PyTorch (Megatron, DeepSpeed, Lightning, the HF
Trainer, FSDP) beats plain PyTorch when its frames or lines are present. A finer name (keras, caffe,
ultralytics...) is kept as the detail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from ml_skills.engine.read.matcher import Matcher
from ml_skills.models import LogEvidence

HEAD_CHUNKS = 2
TRACEBACK_CHUNKS = 16  # chunks holding a traceback read for markers, at most

# marker name -> pattern. A name is a framework of the report's vocabulary or a finer one (DETAIL).
MARKERS: list[tuple[str, str]] = [
    # platforms that ran the job
    ("kubeflow", r"(?i)(kubeflow|\bkfp[._ /-]|argoproj|\bargo\b|\b(tf|pytorch|mpi)job\b|ml-pipeline)"),
    ("vertex", r"(?i)(aiplatform|\bvertex[-_ ]?ai\b|gcloud ai |customjob|ml\.googleapis\.com|ai-platform|cloud ?ml\b|ml-engine|xmanager)"),
    ("ray", r"(\bray::|raylet|ray_worker|\bRay(Task|Actor)Error|ActorDiedError|\bray\.(exceptions|tune|train|init|util|data)\b|(packages|python)/ray/|\((\w+ )?pid=\d+(, ip=[0-9.]+)?\)|\bRay (Train|Tune)\b|[/\\]ray_results\b|^Number of trials: \d+/\d+ \(|\bray-[\w-]+-(head|worker)\b|\bRayTask ID: |The actor is dead because its worker process has died|Worker exit type: [A-Z_]+)"),
    ("sagemaker", r"(?i)(sagemaker|ExecuteUserScriptError|AlgorithmError)"),
    ("azureml", r"(?i)(azureml|azure ml\b|azure machine learning)"),
    ("watson", r"(?i)watson"),
    # wrappers of PyTorch
    # Megatron's own modules, repositories and words; not a path segment that only borrows the name ('megatron_output',
    # 'megatron-sft-recipes': batch 82's ms-swift FSDP2 runs, read megatron)
    # and its training_log line, whatever the log names ('iteration     6900/  159576 | consumed samples:       251312 |')
    ("megatron", (r"(?i)(megatron(?:[^_a-z0-9-]|$)|megatron[-_](?:lm|deepspeed|core|bridge|energon|patch)\b|"
                  r"\biteration\s+\d+/\s*\d+\s+\|\s+consumed (?:samples|tokens):)")),
    ("deepspeed", r"(?i)(deepspeed|\bzero_optimization\b|\[launch\.py:\d+:)"),
    ("lightning", r"(pytorch_lightning|lightning\.pytorch|lightning_fabric|lightning/(pytorch|fabric)|lightning\.fabric|LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES|`Trainer\.fit`|\bv_num=|GPU available: (True|False)|\| Name +\| Type +\| Params|could not find the monitored key in the returned metrics|: '[\w/.-]+' was not in top \d+\b)"),
    # (huggingface_hub, but not wandb's 'Detected [huggingface_hub.inference] in use.', which any diffusers or accelerate
    # script importing the hub's client prints)
    ("hf-trainer", r"(\btransformers[/\\](?:trainer|training_args|modeling_|models[/\\]|generation|tokenization|utils[/\\]|integrations|configuration_|data[/\\]|pipelines|optimization|pytorch_utils|activations|__init__)|\btransformers\.(trainer|models|modeling|utils|generation|tokenization|configuration)|\*\*\*\*\* Running training \*\*\*\*\*|'train_runtime'|\{'loss': -?[0-9.naei]+, '(grad_norm|learning_rate)'|from transformers import|huggingface_hub(?:\.(?:[^i]|i[^n])|[^.]|$)|huggingface\.co/)"),
    # FSDP's classes and modules, FSDP2's fully_shard and accelerate's fsdp2_* helpers, a launch's --fsdp flag or fsdp_config
    ("fsdp", r"(FullyShardedDataParallel|\bFSDP2?\b|fully_sharded|torch[./]distributed[./]fsdp|--fsdp\b|\bfsdp_config\b|\bfsdp2_\w+|\bfully_shard\b)"),
    # base libraries (PyTorch's DataLoader names its workers 'worker process 0' or 'worker (pid 123)'; Paddle's says
    # 'DataLoader worker(1) caught KeyError')
    ("pytorch", r"(torch[/\\._]|\btorch-\d|\b(?:import|from) torch\b|\bTORCH_[A-Z_]+=|(?i:\bpytorch)|/aten/src/|\btorch \d|\bPyTorch\b|torchrun|\[rank\d+\]:|ProcessGroup(NCCL|Gloo)|\bc10d\b|\bc10::|Tried to allocate \d|DataLoader worker (?:process|\(pid)|(?i:caffe2)|(?i:\bgloo\b))"),
    ("tensorflow", r"((?i:tensorflow)|\btf\.(keras|data|function|compat|errors|distribute|config|train|estimator|contrib)\b)"),
    ("tensorflow-startup", r"(cpu_feature_guard|oneDNN custom operations|This TensorFlow binary is optimized|Successfully opened dynamic library|dso_loader|TF-TRT Warning|Unable to register cu(DNN|FFT|BLAS) factory|Could not find cuda drivers)"),
    # TensorFlow's C++ runtime logging from its own sources: torch_xla and JAX print these too (XLA and TSL came out of
    # TensorFlow), so beside another framework's marks they are its runtime, not TensorFlow
    ("tensorflow-runtime", r"\btensorflow/(?:core|compiler|tsl|stream_executor)/[\w/]+\.cc:\d+\]"),
    ("keras", r"(?i)(\bkeras\b|Using TensorFlow backend|\d+/\d+ \[=*[>.]*\] - (ETA: )?\d+m?s|^\d+/\d+ - \d+m?s - |\d+/\d+ (\xe2\x94\x81)+ )"),  # bars of Keras 2 (verbose 1, 2), Keras 3
    ("jax", r"(\bjax|\bflax\b|XlaRuntimeError|\boptax\b|\bJAX|external/xla/|external/org_tensorflow/|\blevanter\.|\bhaliax\b|\bt5x[./])"),  # Levanter, Haliax and T5X are JAX-only
    ("xla", r"\bXLA\b"),
    ("caffe", r"((?i:caffe[^2])|\b(solver|net|syncedmem|layer_factory|blob)\.(cpp|hpp):\d+\]|\b(Test|Train) net output #\d+:|Iteration \d+, Testing net \(#\d+\)|Learning Rate Policy: |Ignoring source layer )"),
    ("paddle", r"(?i)paddle"),
    ("mxnet", r"(?i)(mxnet|\bgluon\b)"),
    ("mindspore", r"(?i)mindspore"),
    ("chainer", r"(?i)chainer"),
    ("darknet", r"(?i)darknet"),
    ("cntk", r"(?i)\bcntk\b"),
    ("mlx", r"\bmlx\b"),
    ("bigdl", r"(?i)bigdl"),
    # Horovod runs over TensorFlow, Keras, PyTorch or MXNet; named alone (its mpi_lib in a native backtrace), it is the
    # only framework the log shows
    ("horovod", r"(?i)\bhorovod\b"),
    # finer names of PyTorch projects
    ("ultralytics", r"(?i)(ultralytics|yolov5|yolov8)"),
    ("detectron2", r"detectron2"),
    ("fairseq", r"fairseq"),
    ("mmdet", r"\b(mmdet|mmcv|mmengine)\b"),
    ("torchbiggraph", r"torchbiggraph"),
    ("nanogpt", r"iter \d+: loss [0-9.]+, time [0-9.]+ms, mfu"),
]

PLATFORMS = ["kubeflow", "vertex", "ray", "sagemaker", "azureml", "watson"]
# FSDP before the HF Trainer: a Trainer run sharded with FSDP is labelled by its sharding wherever both are marked (batch 82)
WRAPPERS = ["megatron", "deepspeed", "lightning", "fsdp", "hf-trainer"]
BASES = ["pytorch", "jax", "tensorflow", "caffe", "paddle", "mxnet", "mindspore", "chainer", "darknet", "cntk", "mlx", "bigdl", "horovod"]
# finer name -> the framework of the report's vocabulary it stands under
DETAIL = {"sagemaker": "other", "azureml": "other", "watson": "other", "keras": "tensorflow",
          "ultralytics": "pytorch", "detectron2": "pytorch", "fairseq": "pytorch", "mmdet": "pytorch",
          "torchbiggraph": "pytorch", "nanogpt": "pytorch",
          **{b: "other" for b in BASES[3:]}}
VOCABULARY = {"pytorch", "lightning", "deepspeed", "fsdp", "hf-trainer", "tensorflow", "jax", "megatron", "ray", "kubeflow", "vertex"}
# a frame's package (site-packages/<pkg>/ or a source tree of that name) -> marker name
PACKAGES = {"torch": "pytorch", "torchvision": "pytorch", "torchaudio": "pytorch", "tensorflow": "tensorflow",
            "keras": "keras", "tf_keras": "keras", "jax": "jax", "jaxlib": "jax", "flax": "jax", "optax": "jax",
            "pytorch_lightning": "lightning", "lightning": "lightning", "lightning_fabric": "lightning",
            "deepspeed": "deepspeed", "megatron": "megatron", "transformers": "hf-trainer", "ray": "ray",
            "kfp": "kubeflow", "paddle": "paddle", "mxnet": "mxnet", "mindspore": "mindspore", "chainer": "chainer",
            "caffe": "caffe", "ultralytics": "ultralytics", "detectron2": "detectron2", "fairseq": "fairseq",
            "mmdet": "mmdet", "mmcv": "mmdet", "mmengine": "mmdet", "torchbiggraph": "torchbiggraph"}
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)[/\\]")
_PKG = re.compile(r"(?:^|[/\\])(" + "|".join(sorted(PACKAGES, key=len, reverse=True)) + r")[/\\]")


@cache
def _matcher(engine: str | None) -> Matcher:
    return Matcher([p for _, p in MARKERS], single=[True] * len(MARKERS), engine=engine)


class Tally:
    """Framework -> number of chunks that named it, over one pass.

    The chunks read are kept as events (always read: the head and the last; holds a traceback), and the
    counts are replayed from them, so the tallies of consecutive ranges of a log merge into the tally of
    the whole (scanpass.py): only the first TRACEBACK_CHUNKS chunks with a traceback count.
    """

    def __init__(self, engine: str | None):
        self.engine = engine
        self._events: list[tuple[bool, bool, dict[str, int]]] = []  # (always read, holds a traceback, its markers)
        self._traceback_chunks = 0

    def read(self, chunk: bytes | bytearray, chunk_no: int, last: bool, traceback: bool) -> None:
        """Count the chunk's markers if it is one where a framework shows itself."""
        forced = chunk_no < HEAD_CHUNKS or last
        traceback = traceback and self._traceback_chunks < TRACEBACK_CHUNKS
        if not (forced or traceback):
            return
        self._traceback_chunks += traceback
        counts: dict[str, int] = {}
        for idx, _ in _matcher(self.engine).find(chunk):
            name = MARKERS[idx][0]
            counts[name] = counts.get(name, 0) + 1
        self._events.append((forced, traceback, counts))

    def merge(self, later: Tally) -> None:
        """Add the tally of the range of the log right after this one's."""
        self._events += later._events
        self._traceback_chunks += later._traceback_chunks

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        seen = 0
        for forced, traceback, counts in self._events:
            traceback = traceback and seen < TRACEBACK_CHUNKS
            if not (forced or traceback):
                continue
            seen += traceback
            for name, n in counts.items():
                out[name] = out.get(name, 0) + n
        return out


def frame_packages(frames: Iterable[str]) -> list[str]:
    """Marker names of the frames' packages, outermost first (a frame is 'path:function')."""
    out: list[str] = []
    for f in frames:
        path = f.rsplit(":", 1)[0]
        # an installed package is the folder right under site-packages (diffusers/models/transformers/ is diffusers');
        # a source tree's, the innermost folder of a known name
        m = _last(_SITE, path) or _last(_PKG, path)
        if m is not None and m.group(1) in PACKAGES:
            out.append(PACKAGES[m.group(1)])
    return out


def _last(rx: re.Pattern[str], path: str) -> re.Match[str] | None:
    m = None
    for m in rx.finditer(path):
        pass
    return m


def decide(logs: Iterable[LogEvidence]) -> tuple[str, str | None]:
    """(framework of the report's vocabulary or 'unknown', finer name or None) from the logs' markers and frames."""
    counts: dict[str, int] = {}
    terminal: list[str] = []
    for log in logs:
        for k, v in log.frameworks.items():
            counts[k] = counts.get(k, 0) + v
        if log.tracebacks:
            terminal = frame_packages(log.tracebacks[-1].frames)
    for name in terminal:  # the terminal traceback's frames are evidence as strong as any marked chunk
        counts[name] = counts.get(name, 0) + 1
    base = _base(counts, terminal)
    detail = next((d for d, fw in DETAIL.items() if counts.get(d) and fw == base and base in VOCABULARY), None)
    platform = next((p for p in PLATFORMS if counts.get(p)), None)
    if platform is not None:
        return (platform, None) if platform in VOCABULARY else ("other", platform)
    wrapper = next((w for w in WRAPPERS if counts.get(w)), None)
    if wrapper is not None and base in (None, "pytorch"):
        return wrapper, detail
    if base is None:
        return "unknown", None
    if base in VOCABULARY:
        return base, detail
    return "other", base


def _base(counts: dict[str, int], terminal: list[str]) -> str | None:
    """The base library: the outermost one among the terminal traceback's frames, else the most marked."""
    for name in terminal:
        if name in BASES:
            return name
        if DETAIL.get(name) in BASES[:3]:
            return DETAIL[name]
    named = {b: counts.get(b, 0) for b in BASES if counts.get(b)}
    if counts.get("keras"):
        named["tensorflow"] = named.get("tensorflow", 0) + counts["keras"]
    side = counts.get("tensorflow-startup", 0) + counts.get("tensorflow-runtime", 0)
    beside = len(named) > 1 or any(counts.get(w) for w in WRAPPERS)  # another framework, or a PyTorch trainer's marks
    if beside and "tensorflow" in named and named["tensorflow"] <= side:
        # start-up lines of TensorFlow imported on the side (by tensorboard, transformers), or its C++ runtime's lines
        # printed by torch_xla or JAX
        del named["tensorflow"]
    if not named:  # a PyTorch project's own banner or lines (Ultralytics, detectron2, fairseq, mmdet) name its base
        named = {DETAIL[d]: counts[d] for d in DETAIL if counts.get(d) and DETAIL[d] in BASES[:3]}
    if not named and counts.get("xla"):
        return "jax"
    if not named:
        return None
    return max(named, key=lambda b: (named[b], -BASES.index(b)))
