"""The engine on every real log of tests/corpus and tests/real-logs, scored by bench/accuracy.py.

The floors sit a little under what the engine reaches (docs/accuracy.md has the figures), so a
change that loses cases fails here; raise them when the engine gets better.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine import accuracy_bench

# Cases 343-355 (thin classes) added 7 abstentions. Then a log that stops where ranks or workers wait (distributed
# start-up, the first collective, the first step or batch), or a stack cut while it waited, became a weak stalled
# signal (engine/stops.py): 7 of the 9 hang abstentions right. Cases 356-370 (logs that stop with no error, collected
# after that) scored 5/15 before the wordings they showed were added (older Lightning 'initializing ddp', TF's
# 'Reduce to ... then broadcast to', a first step, mmcv's workflow line, a markdown '**Killed**'), 12/15 after.
# Cases 450-554 (three prospective batches of issue 13, scored before any change: 28/42, 18/29, 16/25) brought the
# corpus to 507 cases; the 411 cases before them stay at 393/411 with 0 wrong guesses. Floors below are today's figures
# on the whole corpus after the changes those batches prompted (tuned on 450-529; 530-554 only through one wording).
TOP1_FLOOR = 0.91  # reached: 470/511 = 0.920 on corpus and real-logs
PRECISION_FLOOR = 0.98  # reached: 470/470 = 1.00 (right when it names a class)
CITED_MISS_CEILING = 0.045  # reached: 16/397 = 0.040 right answers cite a sibling line (a hang's other start-up lines)
DEV_TOP1_FLOOR = 0.92  # reached: 235/253 = 0.929 on the odd-numbered (dev) corpus cases
HELD_OUT_TOP1_FLOOR = 0.90  # reached: 231/254 = 0.909 on the even-numbered (held-out) corpus cases



@pytest.fixture(scope="module")
def results():
    return accuracy_bench.load().run_all(lab=Path("/nonexistent"))


def test_corpus_is_all_there(results):
    assert sum(r.suite == "corpus" for r in results) >= 280
    assert sum(r.suite == "real-logs" for r in results) >= 4


def test_a_native_abort_is_read_through_the_error_it_reports(results):
    """'terminate called ... what(): NCCL error ...' on one line is the NCCL failure ending the process (corpus 187)."""
    r = next(r for r in results if r.name.startswith("187-"))
    assert (r.predicted, r.run_status) == ("nccl-distributed", "crashed"), r.reasons


def test_a_native_abort_on_the_line_before_its_what_stays_below_the_timeout_it_carries(results):
    """'terminate called ...' then 'what(): ... Watchdog caught collective operation timeout' is the NCCL timeout
    ending the process, even though a timeout is itself only a symptom (corpus 213)."""
    r = next(r for r in results if r.name.startswith("213-"))
    assert (r.predicted, r.cited) == ("nccl-distributed", True), r.reasons


def test_an_image_pull_the_registry_denied_is_a_permission_failure(results):
    """kubelet's 'Failed to pull image ... denied: Token exchange failed' names why the pull failed (corpus 211)."""
    r = next(r for r in results if r.name.startswith("211-"))
    assert (r.predicted, r.cited) == ("cloud-permissions-quota", True), r.reasons


def test_a_loss_blowup_is_cited_where_it_began(results):
    """The quoted line is the step the loss first exploded at, not its later peak (corpus 206, 207)."""
    for prefix in ("206-", "207-"):
        r = next(r for r in results if r.name.startswith(prefix))
        assert (r.predicted, r.cited) == ("optimization-divergence", True), (prefix, r.reasons)


def test_an_nccl_error_is_read_through_its_last_error_detail(results):
    """NCCL's 'Last error:' names what failed: two ranks on one GPU is a launch mistake (corpus 199), not NCCL's."""
    r = next(r for r in results if r.name.startswith("199-"))
    assert (r.predicted, r.cited) == ("config-error", True), r.reasons


def test_a_log_cut_inside_a_traceback_is_a_crash_that_asks_for_the_exception(results):
    """A paste that ends in a traceback's frames: the run crashed, and the missing exception line is asked for (corpus 191)."""
    r = next(r for r in results if r.name.startswith("191-"))
    assert r.run_status == "crashed" and r.abstained, (r.run_status, r.predicted)
    assert "before its exception line" in (r.insufficient or "")


def test_top1_accuracy_floor(results):
    right = sum(r.correct for r in results)
    assert right / len(results) >= TOP1_FLOOR, [r.name for r in results if not r.correct]


def test_dev_half_accuracy_floor(results):
    dev = [r for r in results if r.half == "dev"]
    assert sum(r.correct for r in dev) / len(dev) >= DEV_TOP1_FLOOR, [r.name for r in dev if not r.correct]


def test_held_out_half_accuracy_floor(results):
    held = [r for r in results if r.half == "held-out"]
    assert sum(r.correct for r in held) / len(held) >= HELD_OUT_TOP1_FLOOR, [r.name for r in held if not r.correct]


def test_when_it_names_a_class_it_is_nearly_always_right(results):
    named = [r for r in results if not r.abstained]
    assert sum(r.correct for r in named) / len(named) >= PRECISION_FLOOR, [(r.name, r.predicted) for r in named if not r.correct]


def test_every_abstention_says_what_evidence_is_missing(results):
    for r in results:
        # a 'completed, no failure' verdict names no class either, but it is a claim, not an abstention (a miss on a
        # labelled failure, counted as one in top-1)
        if r.abstained and r.run_status != "completed":
            assert r.insufficient and len(r.insufficient) > 40, r.name


def test_decisive_line_is_cited_for_right_answers(results):
    right = [r for r in results if r.correct]
    uncited = [r.name for r in right if not r.cited]
    # known: a few cases cite a sibling line of the same error (docs/accuracy.md lists them)
    assert len(uncited) / len(right) <= CITED_MISS_CEILING, uncited


def test_report_is_written(tmp_path):
    bench = accuracy_bench.load()
    out = tmp_path / "accuracy.md"
    assert bench.main(["--out", str(out), "--quiet", "--lab", str(tmp_path)]) == 0
    text = out.read_text()
    assert "## Confusion matrix" in text and "corpus held-out (even)" in text and "| nan-inf |" in text


def test_lab_runs_with_a_case_json_are_scored_in_their_own_column(tmp_path):
    run = tmp_path / "runs" / "sigkill"
    run.mkdir(parents=True)
    code = "import os; print('epoch 0 loss 0.9', flush=True); os.kill(os.getpid(), 9)"
    with open(run / "train.log", "wb") as out:  # a real SIGKILL, as the shell reports it
        subprocess.run(["bash", "-c", f'{sys.executable} -c "{code}"; true'], stdout=out, stderr=subprocess.STDOUT,
                       timeout=60, check=False)
    (run / "case.json").write_text(json.dumps({"primary_cause": "oom", "acceptable": ["process-crash"],
                                               "decisive_lines": ["Killed"], "run_status": "crashed"}))
    lab = [r for r in accuracy_bench.load().run_all(lab=tmp_path / "runs") if r.suite == "lab"]
    assert [(r.name, r.correct, r.cited) for r in lab] == [("sigkill", True, True)]


def test_missing_lab_directory_is_a_one_line_error(tmp_path, capsys):
    assert accuracy_bench.load().main(["--out", str(tmp_path / "a.md"), "--lab", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no lab directory") and err.count("\n") == 1


def test_a_hung_run_is_read_from_a_ray_stack_dump(results):
    """'ray stack' prints py-spy's older dump ('Stack dump for <ps line>', 'Thread 0x... (active)'): a live, hung run (corpus 231)."""
    r = next(r for r in results if r.name.startswith("231-"))
    assert (r.predicted, r.cited, r.run_status) == ("stalled", True, "hung"), r.reasons


def test_a_validation_only_nan_metric_is_an_evaluation_problem(results):
    """A Keras validation metric that is nan beside a finite training loss points at evaluation, not divergence (corpus 222)."""
    r = next(r for r in results if r.name.startswith("222-"))
    assert (r.predicted, r.cited) == ("evaluation-mismatch", True), r.reasons


def test_a_validation_loss_that_alone_is_nan_is_an_evaluation_problem(results):
    """val_loss nan every epoch while the training loss stays finite: the evaluation is broken (corpus 069)."""
    r = next(r for r in results if r.name.startswith("069-"))
    assert (r.predicted, r.run_status) == ("evaluation-mismatch", "degraded"), r.reasons


def test_a_traceback_after_ctrl_c_is_a_hang_the_user_interrupted(results):
    """'^CTraceback' (cut before KeyboardInterrupt) and a KeyboardInterrupt inside DataLoader frames are hangs (corpus 236-238)."""
    for prefix in ("236-", "237-", "238-"):
        r = next(r for r in results if r.name.startswith(prefix))
        assert (r.predicted, r.cited, r.run_status) == ("stalled", True, "hung"), (prefix, r.predicted, r.run_status)


def test_a_near_zero_accuracy_beside_a_matching_loss_is_a_metric_problem(results):
    """Keras accuracy ~0 on a regression whose val_loss tracks the training loss: the metric does not fit the task (corpus 038)."""
    r = next(r for r in results if r.name.startswith("038-"))
    assert (r.predicted, r.run_status) == ("evaluation-mismatch", "degraded"), r.reasons


def test_a_traceback_pasted_without_indentation_is_still_read(results):
    """A GitHub paste outside a code block: frames at column 0, `in <module>` eaten as an HTML tag, a
    non-standard header; the KeyError at its end is the failure (corpus 250)."""
    r = next(r for r in results if r.name.startswith("250-"))
    assert (r.predicted, r.cited, r.run_status) == ("data-pipeline", True, "crashed"), r.reasons


def test_a_data_loader_list_handed_down_by_the_runner_does_not_make_a_hook_error_a_data_error(results):
    """mmcv's `runner.run(data_loaders, ...)` sits in every mmdet traceback; an assert in a training hook
    is a configuration problem, not a data one (corpus 251)."""
    r = next(r for r in results if r.name.startswith("251-"))
    assert (r.predicted, r.cited) == ("config-error", True), r.reasons


def test_a_resume_argument_in_the_callers_line_does_not_make_an_fp16_error_a_checkpoint_error(results):
    """`trainer.train(resume_from_checkpoint=...)` sits in most HF scripts; GradScaler's 'Attempting to
    unscale FP16 gradients' below it is a precision setup error (corpus 254)."""
    r = next(r for r in results if r.name.startswith("254-"))
    assert (r.predicted, r.cited) == ("config-error", True), r.reasons


def test_xla_fatal_checks_and_library_init_failures_are_named(results):
    """An absl/glog FATAL 'F ...cc:54] Check failed' line aborts the process (corpus 261); XLA's 'INTERNAL: the
    library was not initialized' is cuBLAS failing to initialise (corpus 262)."""
    got = {p: next(r for r in results if r.name.startswith(p)) for p in ("261-", "262-")}
    assert (got["261-"].predicted, got["261-"].cited) == ("process-crash", True), got["261-"].reasons
    assert (got["262-"].predicted, got["262-"].cited) == ("cuda-runtime", True), got["262-"].reasons


def test_a_heap_abort_leads_the_peer_that_saw_its_connection_close(results):
    """glibc's 'free(): corrupted unsorted chunks' on rank 0, then rank 1's NCCL 'Connection closed by localRank 0',
    the agent's SIGTERM and 'exitcode: -6': the abort is quoted, not the exit code it caused (corpus 377)."""
    r = next(r for r in results if r.name.startswith("377-"))
    assert (r.predicted, r.cited) == ("process-crash", True), r.reasons


def test_tf_cluster_coordinator_closure_errors_are_a_lost_peer(results):
    """ClusterCoordinator's '/job:worker/task:2 encountered the following error when processing closure:
    UnavailableError():' with 'Socket closed' from the ps on later lines is a lost gRPC peer (corpus 380)."""
    r = next(r for r in results if r.name.startswith("380-"))
    assert (r.predicted, r.cited, r.run_status) == ("nccl-distributed", True, "crashed"), r.reasons


def test_azure_ml_pipeline_step_failures_are_named(results):
    """Azure ML pipeline execution logs: 'Job failed, job RunId is ... Error:' (corpus 415, 417), the backend's
    'Failed to update outputs and mark job as failed' after the step's job ended (416, 424), and a step whose
    compute target 'AzureMLCompute cluster ... does not exist' (419) are the orchestrator failing the step."""
    for p in ("415-", "416-", "417-", "419-", "424-"):
        r = next(r for r in results if r.name.startswith(p))
        assert (r.predicted, r.cited) == ("pipeline-orchestration", True), (p, r.reasons)


def test_platform_access_refusals_are_permission_failures(results):
    """botocore's rendering of a bodiless S3 403, '(403) when calling the HeadObject operation: Forbidden' (corpus
    414), and Azure ML's 'not an owner or assigned user to the Compute Instance' (418) are the identity's rights;
    a SageMaker pipeline's 'StepStatus': 'Failed' above a FailureReason that pprint wrapped over four lines (410)
    is at least the pipeline step failing."""
    got = {p: next(r for r in results if r.name.startswith(p)) for p in ("410-", "414-", "418-")}
    assert (got["414-"].predicted, got["414-"].cited) == ("cloud-permissions-quota", True), got["414-"].reasons
    assert (got["418-"].predicted, got["418-"].cited) == ("cloud-permissions-quota", True), got["418-"].reasons
    assert got["410-"].predicted == "pipeline-orchestration", got["410-"].reasons


def test_corpus_cases_are_valid_and_no_log_is_counted_twice():
    """tests/corpus/check_corpus.py: every case well-formed, decisive lines verbatim, no two identical logs."""
    proc = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "corpus" / "check_corpus.py")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert " 0 invalid" in proc.stdout


def test_a_coco_ap_of_minus_one_means_the_evaluation_found_no_ground_truth(results):
    """pycocotools prints -1 for an AP it cannot define (no ground-truth box for what it evaluated): corpus 401."""
    r = next(r for r in results if r.name.startswith("401-"))
    assert (r.predicted, r.cited) == ("evaluation-mismatch", True), r.reasons
