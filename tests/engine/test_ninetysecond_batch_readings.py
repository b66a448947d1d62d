"""Readings issue 13's ninety-second to hundred-and-fifth batches showed, each on a verbatim public log (the corpus case cited).

TensorFlow on a node with no GPU logs its search for one at WARNING and ERROR level ('Could not load dynamic library
'libcudart.so.11.0'', 'failed call to cuInit: CUDA_ERROR_NO_DEVICE') and then says it goes on without one ('Ignore above
cudart dlerror if you do not have a GPU set up', 'kernel driver does not appear to be running on this host'). A SLURM job
that was later killed by its memory cgroup (mechanoChem/active-learning, corpus 2295) was read cuda-runtime from those
start-up lines, 'which failed first'. Ray's memory monitor names the host-memory kill in one sentence ('... which exceeds
the memory usage threshold of 0.95. Ray killed this worker'); a paste that starts there, without the
`ray.exceptions.OutOfMemoryError` line above it (OpenRLHF/OpenRLHF#171, corpus 2300), named no class.

Three more wordings, each the framework's own: MLX on Apple silicon reports running out of (unified) GPU memory as
'[METAL] Command buffer execution failed: Insufficient Memory (...kIOGPUCommandBufferCallbackErrorOutOfMemory)'
(ml-explore/mlx-lm#236, corpus 2307: no class named); deepspeech.pytorch's guard says 'received a nan loss, setting loss
value to 0' and skips the update, and training goes on (SeanNaren/deepspeech.pytorch#485, corpus 2320: read as running,
not recovered); Hugging Face's run_glue.py on CoLA ends 'eval_matthews_correlation = 0.0', what scikit-learn returns when
every prediction is one class (huggingface/transformers#9396, healthy 1089: read as running, not degraded).

And two from committed job files. PyTorch's ImageNet example prints '=> no checkpoint found at ...' and trains from
scratch (every such line in the corpus is one the run went on past); a crowd-counting run whose Dataset then failed on an
h5 key (RCVLab-AiimLab/crowd_counting, corpus 2317) was read io-checkpoint from that print. A segmentation run whose every
evaluation reads 'dice score: 1.37e-05.' inside a sentence beside its loss (capstone-fall2021/lung_nodule_segmentation,
corpus 2323) was read running: the score was sought only at a line's end, without an exponent, and never on a line
naming a loss. A progress bar's running 'validation_bleu=0.000' beside its loss (healthy 567) is still no summary.

TensorBoard's summary writer warns 'NaN or Inf found in input tensor.' when it is handed a non-finite value to log; a D4PG
run logging a mean reward over zero episodes printed it bare, with no logger prefix, and trained on (AsterisCrack/
BipedRobot, healthy 1095): it was read as a NaN check that fired, nan-inf/diverged. It is a hint now: the corpus runs that
print it (712, 1215, 1283, 1712, 518) are named nan-inf by their NaN losses.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(number: str, where: str = "corpus") -> str:
    return str(next((TESTS / where).glob(f"{number}-*")) / "train.log")


def test_tensorflow_finding_no_gpu_at_start_up_does_not_outrank_the_memory_kill_that_ended_the_job():
    d = diagnose(DiagnoseRequest(target=_case("2295")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    assert "Killed" in d.root_cause.proximate or "oom-kill" in d.root_cause.proximate, d.root_cause.proximate
    assert "cuda-runtime" not in [r.failure_class.value for r in d.ruled_out if "failed first" in r.reason]


def test_rays_memory_monitor_sentence_alone_is_the_host_oom():
    d = diagnose(DiagnoseRequest(target=_case("2300")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    assert "memory usage threshold" in d.root_cause.proximate, d.root_cause.proximate


def test_mlx_metal_insufficient_memory_is_the_devices_oom():
    d = diagnose(DiagnoseRequest(target=_case("2307")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    assert "Insufficient Memory" in d.root_cause.proximate, d.root_cause.proximate


def test_a_nan_loss_set_to_zero_and_skipped_then_trained_past_is_recovered():
    d = diagnose(DiagnoseRequest(target=_case("2320")))
    assert d.run_status.value == "recovered", d.run_status
    assert d.primary_cause is None, d.primary_cause  # the run went on past it: no failure to name


def test_a_matthews_correlation_of_zero_at_the_end_is_a_degraded_run():
    d = diagnose(DiagnoseRequest(target=_case("1089", "healthy")))
    assert d.run_status.value == "degraded", d.run_status
    assert "matthews" in d.root_cause.proximate.lower(), d.root_cause.proximate


def test_a_no_checkpoint_found_print_the_run_went_past_is_not_the_cause_of_a_later_traceback():
    d = diagnose(DiagnoseRequest(target=_case("2317")))
    assert d.primary_cause is not None and d.primary_cause.value == "data-pipeline", d.primary_cause


def test_a_dice_score_near_zero_at_every_evaluation_is_a_degraded_run():
    d = diagnose(DiagnoseRequest(target=_case("2323")))
    assert d.run_status.value == "degraded", d.run_status
    assert "dice score: 1." in d.root_cause.proximate, d.root_cause.proximate


def test_a_progress_bars_running_bleu_beside_its_loss_is_no_summary():
    d = diagnose(DiagnoseRequest(target=_case("567", "healthy")))
    assert d.primary_cause is None and d.run_status.value == "completed", (d.primary_cause, d.run_status)


def test_tensorboards_nan_warning_alone_names_no_failure():
    d = diagnose(DiagnoseRequest(target=_case("1095", "healthy")))
    assert d.primary_cause is None and d.run_status.value == "running", (d.primary_cause, d.run_status)
    for number in ("1712", "712"):  # with NaN losses beside it, still the NaN
        d = diagnose(DiagnoseRequest(target=_case(number)))
        assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", (number, d.primary_cause)
