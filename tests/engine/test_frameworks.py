"""The report names the framework that wrote a log (issue 13, item 7), read from real logs.

Corpus logs are verbatim public logs (tests/corpus/README.md); framework_logs/ holds logs produced by really
running the failure, with the script that produced each. The floor is the report's figure on
every corpus and healthy log that names its framework (docs/accuracy.md, "Framework").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read import frameworks, scan
from ml_skills.render import text

from tests.engine import accuracy_bench

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"
LOGS = Path(__file__).resolve().parent / "framework_logs"


def _case(prefix: str) -> Path:
    return next(CORPUS.glob(f"{prefix}-*")) / "train.log"


# (corpus case, framework, finer name): the frameworks item 7 found unknown or wrong, and the platforms and libraries
# the report now names; each was unknown or another framework before (docs/accuracy.md, "Framework").
CASES = [
    ("530", "other", "caffe"),  # Caffe's glog lines: syncedmem.cpp, Check failed
    ("010", "other", "caffe"),  # DIGITS: Caffe's solver lines with no glog prefix and no word 'caffe'
    ("142", "pytorch", "ultralytics"),  # YOLOv5 on Windows: torch\lib DLL path
    ("024", "tensorflow", "keras"),  # Keras's progress bars
    ("145", "hf-trainer", None),  # from_pretrained through huggingface_hub
    ("009", "kubeflow", None),  # Kubeflow Pipelines
    ("050", "kubeflow", None),
    ("183", "deepspeed", None),  # only the DeepSpeed launcher's [launch.py:...] lines
    ("059", "pytorch", None),  # Gloo, PyTorch's collective backend (third_party/gloo)
    ("117", "jax", None),  # JAX's coordination service under external/org_tensorflow/
    ("017", "ray", None),
    ("006", "vertex", None),
    ("133", "lightning", None),  # Lightning Fabric frames
    ("136", "other", "paddle"),
    ("349", "other", "mxnet"),
    ("430", "other", "mindspore"),
    ("973", "pytorch", None),  # only 'import torch' above "No module named 'torch'"
    ("964", "pytorch", "mmdet"),  # only mmdet's logger prefix: a PyTorch project's own lines name its base
]


@pytest.mark.parametrize(("case", "framework", "detail"), CASES)
def test_the_report_names_the_framework_the_log_shows(case: str, framework: str, detail: str | None) -> None:
    d = diagnose(DiagnoseRequest(target=str(_case(case))))
    assert (d.framework.value, d.framework_source, getattr(d, "framework_detail", "-")) == (framework, "detected", detail)


def test_a_pytorch_traceback_after_tensorflow_start_up_lines_is_pytorch() -> None:
    """TensorFlow imported on the side logs its start-up lines (tensorflow/core/...); the run's code and its terminal
    traceback are PyTorch's. Produced by framework_logs/tf_then_torch.py with TensorFlow 2.15."""
    log = LOGS / "tf-startup-then-torch-traceback.log"
    body = log.read_text()
    assert "tensorflow/core/" in body and "site-packages/torch/" in body  # both libraries show themselves
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert (d.framework.value, getattr(d, "framework_detail", None)) == ("pytorch", None)


def test_the_terminal_tracebacks_frames_decide_between_libraries() -> None:
    """The outermost library among the frames of the last traceback is the base; without a traceback, the one most
    marked wins, and start-up lines of a library imported on the side count only when nothing else is named."""
    assert frameworks.frame_packages(["/x/site-packages/transformers/trainer.py:train",
                                      "/x/site-packages/torch/nn/modules/module.py:_call_impl",
                                      "C:\\py\\Lib\\site-packages\\tensorflow\\python\\ops\\x.py:f"]) == \
        ["hf-trainer", "pytorch", "tensorflow"]
    ev = scan.scan_log(LOGS / "tf-startup-then-torch-traceback.log")
    assert ev.frameworks.get("tensorflow-startup") and ev.tracebacks
    ev.tracebacks = []  # the same log cut before its traceback: the start-up lines still yield to torch's
    assert frameworks.decide([ev]) == ("pytorch", None)


def test_hyperscan_and_the_re_fallback_find_the_same_markers_on_real_logs() -> None:
    pytest.importorskip("hyperscan")
    patterns = [p for _, p in frameworks.MARKERS]
    fast, slow = (frameworks.Matcher(patterns, single=[True] * len(patterns), engine=e) for e in ("hyperscan", "re"))
    logs = [*sorted(CORPUS.glob("*/train.log"))[::5], *sorted(LOGS.glob("*.log"))]
    for log in logs:
        body = log.read_bytes()
        assert {i for i, _ in fast.find(body)} == {i for i, _ in slow.find(body)}, log


def test_the_report_prints_the_finer_name() -> None:
    d = diagnose(DiagnoseRequest(target=str(_case("530"))))
    assert text.framework(d) == "other, caffe (detected)"


# Reached (docs/accuracy.md, Framework): 275/280 = 0.98 named; dev 141/143 = 0.99; held-out 134/137 = 0.98 (129/137 =
# 0.94 when first met); healthy 12/12. Before this detector: 181/280 = 0.65.
# issue 13 asks for 95%; 0.957 with the ninth batch (its framework labels scored as they came); 587/618 = 0.9498 with the
# twenty-first (its labels scored as they came: 1324 is a custom loop over transformers' CLIP, labelled pytorch and read
# hf-trainer, as transformers' frames are; reading only the Trainer's own files as hf-trainer lost more than it won, 586)
# 621/652 = 0.952 named and 303/319 = 0.9498 held-out with the twenty-fourth batch (1350's only 'torch' is a conda env
# named torch-env, which the scorer reads as naming PyTorch and the detector, rightly, does not)
# 633/666 = 0.950 named and 307/325 = 0.9446 held-out with batches 25-27 (scored as they came: 1396, an accelerate FSDP
# launch whose Dia fine-tune script prints Megatron-style args, read megatron; 1406, xgboost_ray inside a SageMaker job,
# read other)
# 653/687 = 0.951 named and 315/333 = 0.946 held-out with batches 28-30 (scored as they came but for two detector fixes
# they prompted: ms-swift's own swift/ray/ frames read ray, 1446 and 1448, now only a package's ray/ is; Lightning's
# ModelCheckpoint warning 'could not find the monitored key', 1492, now names Lightning)
# 671/710 = 0.945 named and 326/345 = 0.945 held-out with batches 31-32 (scored as they came: SageMaker jobs read
# 'other sagemaker' where their traceback names PyTorch or FSDP, 1575 and 1577; ESPnet's Chainer trainer read pytorch,
# 1535; a Lightning run whose traceback shows only torch, 1536; a Keras paste with no framework line, 1545)
# 686/726 = 0.9449 named and 330/350 = 0.943 held-out with batches 33-34 (scored as they came but for the torch_xla run
# whose TensorFlow C++ runtime lines named TensorFlow, 1622, now read as that runtime beside HF Trainer's marks; 1636,
# GluonTS, which names no framework the detector knows)
# 832/882 = 0.9433 named with batches 79-90 (ms-swift FSDP2 runs of fyh2001/megatron-sft-recipes read megatron from the
# repository's name in their paths, or hf-trainer beside their FSDP marks); 835/882 = 0.9467 after both were read right
NAMED_FLOOR = 0.944
HELD_OUT_FLOOR = 0.94
HEALTHY_FLOOR = 0.9


@pytest.mark.slow
def test_framework_accuracy_floor_on_every_log_that_names_it() -> None:
    accuracy = accuracy_bench.load()  # the reports the corpus tests score (one diagnosis of each case per process)
    rows = accuracy.framework_rows(accuracy.run_all(lab=Path("/nonexistent")), accuracy.run_healthy())

    def share(rs: list) -> float:
        return sum(r.right for r in rs) / len(rs)

    named = [r for r in rows if r.named and r.suite == "corpus"]
    wrong = [(r.name, r.label, r.detected) for r in named if not r.right]
    assert len(named) >= 270
    assert share(named) >= NAMED_FLOOR, wrong
    assert share([r for r in named if r.half == "held-out"]) >= HELD_OUT_FLOOR, wrong
    assert share([r for r in rows if r.named and r.suite == "healthy"]) >= HEALTHY_FLOOR


def test_a_vertex_pipeline_target_is_vertex(monkeypatch: pytest.MonkeyPatch) -> None:
    """The platform that ran the job names the framework, even when the failed task's lines do not (a permission
    error before any code ran)."""
    from ml_skills.collectors import gcp

    from tests.fakes.vertex_api import PROJECT, REGION, VertexFake, load

    with VertexFake() as fake:
        monkeypatch.setenv(gcp.VERTEX_ENV, fake.endpoint)
        monkeypatch.setenv(gcp.LOGGING_ENV, fake.endpoint)
        monkeypatch.setenv(gcp.TIMEOUT_ENV, "2")
        d = diagnose(DiagnoseRequest(vertex_pipeline=load(fake, "permission"), project=PROJECT, region=REGION, once=True))
    assert (d.framework.value, d.framework_source) == ("vertex", "detected")


def test_a_folder_named_transformers_inside_another_package_is_not_the_hf_library() -> None:
    """Corpus 1153 (a committed console capture): a diffusers training loop under accelerate whose traceback runs
    through site-packages/diffusers/models/transformers/transformer_flux2.py. The installed package is the folder right
    under site-packages (diffusers), and the HF marker needs the library's own modules after 'transformers/': the run is
    plain PyTorch, not the HF Trainer."""
    frame = "/home/u/miniconda3/envs/flux2/lib/python3.10/site-packages/diffusers/models/transformers/transformer_flux2.py:forward"
    assert frameworks.frame_packages([frame]) == []
    assert frameworks.frame_packages(["/usr/lib/python3/dist-packages/transformers/trainer.py:train"]) == ["hf-trainer"]
    log = next((ROOT / "tests" / "corpus").glob("1153-*")) / "train.log"
    assert frameworks.decide([scan.scan_log(log)])[0] == "pytorch"


def test_a_path_that_borrows_megatrons_name_is_no_megatron_and_fsdp_outranks_the_trainer() -> None:
    """Corpus 2229 (a committed ms-swift stdout.log, verbatim): an HF Trainer run sharded with FSDP2 whose output folders
    are /home/.../megatron_output/ and megatron-sft-recipes/, and whose launch passes --fsdp: it was read megatron."""
    for number in ("2229",):
        case = next((ROOT / "tests" / "corpus").glob(f"{number}-*"))
        assert frameworks.decide([scan.scan_log(case / "train.log")])[0] == "fsdp", number
