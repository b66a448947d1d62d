"""Batch 44's misses, read as general behaviours (docs/accuracy.md, batch 44; scored at 9d7d5a6 before any change):

- a gradient-boosting model file that is not there ('LightGBM_model.txt', XGBoost's .json or .ubj, CatBoost's .cbm) is
  the run's checkpoint missing, and Python 2's IOError is Python 3's OSError (1831, a CLI wrapper reading the model its
  binary never wrote, was config-error); a missing '..._config.json' stays a configuration file;
- a cancellation (TensorFlow's 'CancelledError: Enqueue operation was cancelled' in a feeder thread, asyncio's or
  concurrent.futures' CancelledError) is requested by whoever stopped the work: it names no failure of its own
  (healthy 769, a DeepLabCut run to its last iteration whose loader thread was stopped, was config-error).

1831 and 769 are verbatim public logs; the other shapes are real CPU runs."""

from __future__ import annotations

from tests.engine.batchcase import case, run_script, verdict


def test_a_python2_ioerror_for_a_missing_model_file_is_a_checkpoint_failure():
    assert verdict(case("1831")) == ("io-checkpoint", "crashed")


_READ_BACK = """
    import json, os, torch
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4); y = x.sum(1, keepdim=True)
    for it in range(0, 300, 100):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"[Info] finished iteration {it} loss {loss.item():.4f}", flush=True)
    os.makedirs("out", exist_ok=True)
    with open(os.path.join("out", "{name}"), mode="r") as f:  # the file the trainer was to write
        print(f.read())
"""


def test_a_missing_model_file_read_back_after_training_is_a_checkpoint_failure(tmp_path):
    log = run_script(tmp_path, _READ_BACK.replace("{name}", "LightGBM_model.txt"))
    assert "FileNotFoundError" in log.read_text() and "LightGBM_model.txt" in log.read_text()
    assert verdict(log) == ("io-checkpoint", "crashed")


def test_a_missing_model_config_file_stays_a_configuration_error(tmp_path):
    log = run_script(tmp_path, _READ_BACK.replace("{name}", "model_config.json"))
    assert "model_config.json" in log.read_text()
    assert verdict(log) == ("config-error", "crashed")


def test_a_feeder_threads_cancellation_after_training_names_no_failure():
    assert verdict(case("769", "healthy"))[0] is None


_CANCELLED_FEEDER = """
    import threading, time, torch
    from concurrent.futures import Future
    batches = Future()

    def feeder():
        batches.result()  # waits for a batch source that the main thread cancels at its end

    threading.Thread(target=feeder, name="feeder").start()
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4); y = x.sum(1, keepdim=True)
    for step in range(1, 6):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step}/5 loss {loss.item():.4f}", flush=True)
    batches.cancel()
    time.sleep(0.5)
"""


def test_a_thread_cancelled_at_the_end_of_a_real_run_names_no_failure(tmp_path):
    log = run_script(tmp_path, _CANCELLED_FEEDER)
    text = log.read_text()
    assert "Exception in thread feeder" in text and "CancelledError" in text
    assert verdict(log)[0] is None
