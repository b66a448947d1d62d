"""Batch 42's misses, read as general behaviours (docs/accuracy.md, batch 42; scored at b7ec0fe before any change):

- a call with arguments the function does not take ('got an unexpected keyword argument') is a disagreement between the
  call site and the signature wherever it was made: a dataset's frame above it says where, not what (1781 was read as
  data-pipeline by `self.dataset.eval(`);
- cuDNN's 'Unable to find a valid cuDNN algorithm to run convolution' is a cuDNN failure (1783 was config-error, an
  exception no rule knew), TensorFlow's 'Shape mismatch in the collective instance N' is workers disagreeing on one
  collective (1778 abstained), and PyTorch's legacy 'THCudaCheck FAIL file=...' says a CUDA call failed even when the
  line is cut before its code (1786 abstained);
- a perplexity that is astronomical in the last two of three reports is a divergence, with the OverflowError its
  math.exp raises after it the consequence (1791 was config-error from that OverflowError);
- a log that stops on a bar at its first item whose label names the process's own reading of files ('Loading checkpoint
  shards: 0%| | 0/2') waits for nobody: no stall is read there (healthy 757 was stalled/hung);
- a banner line that says only that the model is trained ('<<< Model Trained >>>') ends the run (healthy 755 was
  'unknown').

Verbatim public logs stand for the GPU, TPU and multi-worker shapes; the unexpected keyword is a real CPU run."""

from __future__ import annotations

from tests.engine.batchcase import case, run_script, verdict


def test_cudnn_finding_no_algorithm_is_a_cuda_runtime_failure():
    assert verdict(case("1783")) == ("cuda-runtime", "crashed")


def test_tensorflow_collective_shape_mismatch_is_a_distributed_failure():
    assert verdict(case("1778")) == ("nccl-distributed", "crashed")


def test_a_cut_thc_cuda_check_line_still_names_a_failed_cuda_call():
    assert verdict(case("1786")) == ("cuda-runtime", "crashed")


def test_a_perplexity_astronomical_at_the_end_is_divergence_before_the_overflow_it_causes():
    assert verdict(case("1791")) == ("optimization-divergence", "crashed")


def test_a_log_stopping_while_loading_its_weights_is_not_a_stall():
    assert verdict(case("757", "healthy"))[0] is None


def test_a_model_trained_banner_completes_the_run_and_the_log_cut_before_it_does_not(tmp_path):
    log = case("755", "healthy")
    assert verdict(log) == (None, "completed")
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    banner = next(i for i, x in enumerate(lines) if "<<< Model Trained >>>" in x)
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[:banner]), encoding="utf-8")
    assert verdict(cut)[1] != "completed"


_EVAL_CALL = """
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 1)

        def get_candidates(self, chunk_begin, chunk_size):  # this model's version takes no 'indices'
            return self.lin.weight[:, chunk_begin:chunk_begin + chunk_size]

    class Dataset:
        def eval(self, model, indices):
            return model.get_candidates(0, 2, indices=indices)

    class Engine:
        def __init__(self, model):
            self.model, self.dataset = model, Dataset()

        def validation_step(self):
            return self.dataset.eval(self.model, indices=[0, 1])

    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4); y = x.sum(1, keepdim=True)
    for epoch in range(3):
        loss = torch.nn.functional.mse_loss(model.lin(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    print("Evaluate the split valid", flush=True)
    Engine(model).validation_step()
"""


def test_an_unexpected_keyword_argument_under_a_dataset_frame_is_a_call_site_mismatch(tmp_path):
    log = run_script(tmp_path, _EVAL_CALL)
    text = log.read_text()
    assert "get_candidates() got an unexpected keyword argument 'indices'" in text and "in eval" in text
    assert verdict(log) == ("config-error", "crashed")
