"""Short real logs the corpus rules were generalised from, produced here by really running the failure."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose


def _run_into(tmp_path: Path, shell: str) -> Path:
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", shell], stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    return log


def test_bare_sigkill_after_progress_names_oom_but_asks_for_the_kernel_log(tmp_path):
    code = "import os; [print(f'epoch {i} loss {1/(i+1):.3f}', flush=True) for i in range(3)]; os.kill(os.getpid(), 9)"
    py = f'{sys.executable} -c "{code}"'
    log = _run_into(tmp_path, f"{py}; echo \"exit status $?\"")
    assert "Killed" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom"
    assert d.insufficient_evidence and "dmesg" in d.insufficient_evidence
    assert d.decision.value == "NO-GO"


def test_loss_that_jumps_by_orders_of_magnitude_in_a_short_log_is_divergence(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        x = torch.randn(256, 8); y = x @ torch.randn(8, 1)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(6):
            if step == 3:  # a schedule bug: the learning rate jumps 1000x
                for g in opt.param_groups:
                    g["lr"] = 50.0
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"step {step} loss: {loss.item():.4f}", flush=True)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", log.read_text()
    assert [a.kind.value for a in d.anomalies] == ["loss-blowup"]
    assert "train.log:5: step 4 loss:" in d.root_cause.proximate  # the first exploded line, quoted


def test_a_blowup_that_climbs_for_many_steps_is_quoted_where_it_began(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        x = torch.randn(256, 8); y = x @ torch.randn(8, 1)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(24):
            if step == 12:  # the learning rate is raised past stability: the loss grows every step after
                for g in opt.param_groups:
                    g["lr"] = 1.5
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"step {step} loss: {loss.item():.4f}", flush=True)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    losses = [float(line.split("loss: ")[1]) for line in log.read_text().splitlines()]
    low = min(losses)
    first_up = next(i for i, v in enumerate(losses) if i > losses.index(low) and v > max(3 * low, 1.2 * losses[0]))
    assert losses[-1] == max(losses) and first_up < len(losses) - 3, losses  # a long climb, the peak at the end
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", log.read_text()
    blowup = next(a for a in d.anomalies if a.kind.value == "loss-blowup")
    assert blowup.line_no == first_up + 1, (blowup.detail, losses)  # the first exploded step, not the peak
    assert f"step {first_up} loss:" in d.root_cause.proximate


def test_log_that_stops_at_start_up_is_weakly_stalled_and_says_what_to_collect(tmp_path):
    # a hang or a cut log: stalled with low confidence (stops.py), and the first step is to look at the live process
    code = "print('Initializing TorchBackend in DeepSpeed with backend gloo', flush=True)"
    log = _run_into(tmp_path, f'{sys.executable} -c "{code}"')
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert d.primary_cause_confidence <= 0.45 and d.confidence.value == "low"
    assert "distributed start-up" in d.root_cause.root and "the log is cut" in d.root_cause.root
    assert d.fixes[0].fix_id == "dump-stacks" and any("py-spy dump --pid" in c for c in d.next_commands)


def test_exception_ignored_at_shutdown_does_not_outrank_how_the_run_ended(tmp_path):
    # A real child killed by SIGKILL under subprocess.run(check=True), then an object whose __del__ fails at
    # interpreter exit: Python prints 'Exception ignored in:' and a traceback that ended nothing.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import subprocess
        class Writer:
            def __del__(self):
                self.handle.close()  # never opened: AttributeError, ignored by Python at exit
        writer = Writer()
        for epoch in range(3):
            print(f"epoch {{epoch}} loss {{1 / (epoch + 1):.3f}}", flush=True)
        subprocess.run([{sys.executable!r}, "-c", "import os; os.kill(os.getpid(), 9)"], check=True)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    text = log.read_text()
    assert "Exception ignored in" in text and "AttributeError" in text and "SIGKILL" in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.root_cause.proximate
    assert "AttributeError" not in d.root_cause.proximate


def test_sigkill_reported_by_a_wrapper_script_names_oom(tmp_path):
    # bash reports a killed child of a script as '<script>: line N: PID Killed  command', whatever the script is called
    wrapper = tmp_path / "jac-crun"
    code = "import os; [print(f'epoch {i} loss {1/(i+1):.3f}', flush=True) for i in range(3)]; os.kill(os.getpid(), 9)"
    wrapper.write_text(f'#!/bin/bash\n{sys.executable} -c "{code}"\necho done\n')
    log = _run_into(tmp_path, f"bash {wrapper}")
    assert "jac-crun: line 2:" in log.read_text() and "Killed" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", log.read_text()
    assert "Killed" in d.root_cause.proximate


def test_loss_at_an_astronomical_scale_from_the_start_is_divergence_not_the_interrupt_that_ended_it(tmp_path):
    # A real loop whose loss is 1e31 from its first epoch (targets on the wrong scale) and never comes down;
    # its owner then interrupts it (SIGINT, KeyboardInterrupt). The interrupt is the reaction, not the failure.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import os, signal, torch
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a job started in the background inherits SIGINT ignored
        torch.manual_seed(0)
        x = torch.randn(64, 4); y = torch.randn(64, 1) * 3e15
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=1e-40)
        for epoch in range(1, 1001):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"Epoch [{epoch}/1000], Train Loss: {loss.item():.4f}, Train L1 Loss: {loss.item() ** 0.5:.4f}", flush=True)
            print(f"Epoch [{epoch}/1000], Validation Loss: {loss.item() * 0.9:.4f}, Validation L1: 1.0", flush=True)
            if epoch == 30:  # the owner presses Ctrl-C while it trains
                os.kill(os.getpid(), signal.SIGINT)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    assert "KeyboardInterrupt" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause.proximate
    assert "Train Loss" in d.root_cause.proximate  # the training series, quoted from its first line


def test_capitalised_phrases_split_training_and_validation_loss():
    from ml_skills.engine.read.metrics import parse_line

    assert parse_line("Epoch [3/100], Train Loss: 0.4100, Validation Loss: 0.5200")[0] == {"loss": 0.41, "val_loss": 0.52}
    assert parse_line("Epoch [9/100], Validation Loss: 0.5, Validation L1: 0.2, Smoothed Validation Loss: 0.6")[0] == {"val_loss": 0.5}
    assert parse_line("iteration 182/ 250000 | lm loss: 2.382640E+00 | grad norm: 0.227 |")[0] == {"loss": 2.38264, "grad_norm": 0.227}


def test_a_wrapped_exception_is_read_with_its_wrappers_frames(tmp_path):
    # Python prints `raise ... from e` as two tracebacks; the first shows only the innermost frame (tree_get),
    # the second the calls that led there (load_params). The first is still a checkpoint-load failure.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        def tree_get(params, key):
            try:
                return params[key]
            except KeyError as e:
                raise KeyError(f"{key}; available: {sorted(params)}") from e

        def load_params(path):
            flat = {f"param_{i}": i for i in range(4)}  # written flat, read as a tree
            return tree_get(flat, "img")

        for step in range(3):
            print(f"step {step} loss {1 / (step + 1):.3f}", flush=True)
        load_params("params.npz")
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    assert "direct cause" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", d.root_cause.proximate


def test_a_traceback_whose_header_was_cut_off_is_still_parsed(tmp_path):
    # `tail -n` (or a pasted excerpt) often starts among the frames; the failure is still the exception line after them
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        def load_state_dict(path):
            state = {"model": {}, "optimizer": {}}
            return state["scheduler"]  # a checkpoint written without the key the loader expects

        def resume(path):
            return load_state_dict(path)

        for step in range(200):
            print(f"step {step} loss {1 / (step + 1):.4f}", flush=True)
        resume("last.ckpt")
    """))
    full = _run_into(tmp_path, f"{sys.executable} {script}")
    assert "Traceback (most recent call last)" in full.read_text()
    log = tmp_path / "tail.log"
    with open(log, "wb") as out:
        subprocess.run(["tail", "-n", "5", str(full)], stdout=out, check=True)
    text = log.read_text()
    assert "Traceback" not in text and "KeyError" in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "io-checkpoint", text
    assert "KeyError" in d.root_cause.proximate


def test_a_long_healthy_run_with_warnings_that_read_like_errors_is_no_failure(tmp_path):
    # 1,500 progress lines, real torch UserWarnings ("Failure to do this...", "deprecated"), metric names with
    # "error" in them and a "no errors" status line: nothing here is a failure, and the run says it completed.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import warnings, torch
        warnings.simplefilter("always")
        torch.manual_seed(0)
        x = torch.randn(512, 8); y = (x @ torch.randn(8, 1)).squeeze(1)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1000, gamma=0.5)
        sched.step()  # before optimizer.step(): torch warns about the order
        for step in range(1, 3001):
            idx = torch.randint(0, 512, (32,))
            pred = model(x[idx]).squeeze(1)
            loss = torch.nn.functional.mse_loss(pred, y[idx])
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            if step % 2 == 0:
                err = (pred - y[idx]).abs().mean().item()
                print(f"{{'loss': {loss.item():.4f}, 'mean_absolute_error': {err:.4f}, "
                      f"'learning_rate': {sched.get_last_lr()[0]:.5f}, 'epoch': {step / 300:.2f}}}", flush=True)
            if step % 1000 == 0:
                torch.nn.functional.softmax(torch.randn(2, 3))  # implicit dim: a real deprecation UserWarning
                print(f"step {step}: val_error_rate 0.{step // 1000}1, no errors in batch checks", flush=True)
        print("Training completed.", flush=True)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    text = log.read_text()
    assert text.count("UserWarning") >= 4 and len(text.splitlines()) > 1400
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None and d.anomalies == [], (d.primary_cause, d.anomalies)
    assert d.run_status.value == "completed" and d.decision.value == "GO"
    assert [f.fix_id for f in d.fixes] == ["verify-outputs"] and d.fixes[0].risk.value == "safe"  # nothing to recover, outputs to check
    assert d.fixes[0].command == f"ml-skills verify-artifacts {log.parent}"  # filled in from the log, never a placeholder


def _interrupted(tmp_path: Path, body: str, ready: str) -> Path:
    """Run a training script and Ctrl-C it (SIGINT) once it has printed `ready`, as a person at the terminal would."""
    import signal
    import time

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([sys.executable, "-u", str(script)], stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
        end = time.monotonic() + 60
        while ready not in log.read_text() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    assert "KeyboardInterrupt" in log.read_text()
    return log


def test_ctrl_c_of_a_run_blocked_on_its_data_queue_is_a_hang(tmp_path):
    log = _interrupted(tmp_path, """
        import queue, threading
        batches = queue.Queue()
        threading.Thread(target=lambda: [batches.put(i) for i in range(5)], daemon=True).start()  # a loader that stops
        for step in range(1, 1000):
            batch = batches.get()  # blocks forever after the fifth batch
            print(f"step {step} | loss {1.0 / step:.4f}", flush=True)
    """, "step 5 ")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled", log.read_text()
    assert "KeyboardInterrupt" in d.root_cause.proximate


def test_ctrl_c_of_a_run_still_making_progress_names_no_failure(tmp_path):
    log = _interrupted(tmp_path, """
        import math
        for step in range(1, 10**9):
            loss = sum(math.sin(i) ** 2 for i in range(2000)) / 2000 / (1 + step / 1e4)  # computing, not waiting; a loss
            # that moves, as a training loss does (one printed the same to four digits at 15 logs is a frozen network)
            if step % 50 == 0:
                print(f"step {step} | loss {loss:.4f}", flush=True)
    """, "step 100 ")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, (d.primary_cause, d.root_cause.proximate)
    assert d.insufficient_evidence and "interrupted (KeyboardInterrupt" in d.insufficient_evidence
    assert d.decision.value == "NO-GO"


def test_near_zero_accuracy_in_the_first_epochs_of_a_hard_task_is_not_an_evaluation_bug(tmp_path):
    """1000 classes, three epochs: accuracy is near zero because the model has not learned yet, not because the metric is wrong."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        x, y = torch.randn(4096, 64), torch.randint(0, 1000, (4096,))
        vx, vy = torch.randn(1024, 64), torch.randint(0, 1000, (1024,))
        model = torch.nn.Linear(64, 1000)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(1, 4):
            for i in range(0, 4096, 256):
                loss = torch.nn.functional.cross_entropy(model(x[i:i + 256]), y[i:i + 256])
                opt.zero_grad(); loss.backward(); opt.step()
            with torch.no_grad():
                out = model(vx)
                val_loss = torch.nn.functional.cross_entropy(out, vy).item()
                val_acc = (out.argmax(1) == vy).float().mean().item()
            print(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {val_loss:.4f} val_acc {val_acc:.4f}", flush=True)
        print("Training completed.", flush=True)
    """))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    accs = [float(line.rsplit(" ", 1)[1]) for line in log.read_text().splitlines() if "val_acc" in line]
    assert len(accs) == 3 and max(accs) <= 0.05  # the situation really arose
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert all(a.kind.value != "validation-metric-near-zero" for a in d.anomalies), d.anomalies
    assert d.primary_cause is None and d.run_status.value == "completed"


_FROZEN_EVAL_SCRIPT = """
    import copy, torch
    torch.manual_seed(0)
    w = torch.randn(16)
    x, vx = torch.randn(2048, 16), torch.randn(512, 16)
    y, vy = (x @ w > 0).long(), (vx @ w > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    evaluated = {evaluated}
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(6):
        for i in range(0, 2048, 64):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
            vacc = (evaluated(vx).argmax(1) == vy).float().mean().item()
        print(f"Epoch[{{epoch}}] Train-accuracy={{acc:.6f}}", flush=True)
        print(f"Epoch[{{epoch}}] Validation-accuracy={{vacc:.6f}}", flush=True)
"""


def _frozen_eval_run(tmp_path: Path, evaluated: str) -> tuple[Path, list[float], list[float]]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_FROZEN_EVAL_SCRIPT.format(evaluated=evaluated)))
    log = _run_into(tmp_path, f"{sys.executable} {script}")
    text = log.read_text()
    accs = [float(line.rsplit("=", 1)[1]) for line in text.splitlines() if "Train-accuracy=" in line]
    vaccs = [float(line.rsplit("=", 1)[1]) for line in text.splitlines() if "Validation-accuracy=" in line]
    return log, accs, vaccs


def test_validation_accuracy_of_a_model_copy_taken_before_training_is_an_evaluation_mismatch(tmp_path):
    """The evaluation scores a copy of the model made before training (MXNet's fit log format, no loss printed)."""
    log, accs, vaccs = _frozen_eval_run(tmp_path, "copy.deepcopy(model)")
    assert len(vaccs) == 6 and len(set(vaccs)) == 1 and accs[-1] >= vaccs[0] + 0.2, (accs, vaccs)  # it really arose
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert any(a.kind.value == "validation-metric-frozen" for a in d.anomalies), d.anomalies
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause.proximate
    assert d.run_status.value == "degraded"


def test_validation_accuracy_of_the_trained_model_is_not_frozen(tmp_path):
    log, _accs, vaccs = _frozen_eval_run(tmp_path, "model")
    assert len(vaccs) == 6 and len(set(vaccs[-4:])) > 1, vaccs  # the situation really arose: the score moves
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert all(a.kind.value != "validation-metric-frozen" for a in d.anomalies), d.anomalies
    assert d.primary_cause is None


def test_a_megatron_iteration_line_that_lost_its_loss_reads_as_nan():
    # Megatron prints a loss only when its average is > 0: on the Falcon-40B run (corpus 062) the NaN loss of
    # iteration 3385 is simply missing from the line, with nothing skipped (loss scale 1.0)
    from ml_skills.engine.read.metrics import parse_line

    log = Path(__file__).parents[1] / "corpus" / "062-megatron-falcon40b-nan-undetected" / "train.log"
    parsed = [parse_line(x.rstrip("\n")) for x in log.read_text().splitlines()]
    assert [p[1] for p in parsed] == [3383.0, 3384.0, 3385.0]
    assert math.isfinite(parsed[0][0]["loss"]) and math.isfinite(parsed[1][0]["loss"])
    assert math.isnan(parsed[2][0]["loss"])
    assert parse_line("iteration 182/ 250000 | lm loss: 2.382640E+00 | grad norm: 0.227 |")[0]["loss"] == 2.38264


def test_progress_then_only_nccl_init_lines_is_weakly_stalled_at_start_up():
    # corpus 319: the FSDP example's first bar (0/188), then NCCL's communicator init and nothing else (a hang):
    # NCCL creates its communicators at the first collective, so init lines after a first bar are still start-up
    log = Path(__file__).parents[1] / "corpus" / "319-nccl-fsdp-example-hangs-before-first-step-no-kill" / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "stalled" and d.primary_cause_confidence <= 0.45
    assert d.run_status.value == "hung"
    last = len(log.read_text().splitlines())
    assert d.root_cause.proximate_line.line_no >= last - 1 and "NCCL" in d.root_cause.proximate
    assert "distributed start-up" in d.root_cause.root
