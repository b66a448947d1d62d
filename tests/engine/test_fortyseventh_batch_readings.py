"""Batch 47's misses, read as general behaviours (docs/accuracy.md, batch 47; scored at 774bdea before any change):

- TF's collective executor aborting a ring all-reduce on a closed socket ('Aborting RingReduce with Unavailable:
  Socket closed', 'BaseCollectiveExecutor::StartAbort Unavailable') is a peer lost under a collective, as its gRPC
  wordings are (1921 abstained);
- libtpu's '!!!! FATAL ERROR !!!! for [/dev/accelN ...]' and 'all pending programs will fail, and results may be
  corrupted' are the TPU halting (1923 abstained);
- a quantity of the run's repeated progress line that goes NaN or inf for good is the run's numbers gone, whatever it
  is called (1922, FermiNet's 'Step 03455: nan E_h, variance=nan E_h^2', read as running);
- a per-batch loss whose late values stay below a value it had already reached between its low and the rise is batch
  spread, not a blow-up (healthy 806, a BERT SQuAD fine-tune's step_loss, read as optimization-divergence).

1921, 1922, 1923 and healthy 806 are verbatim public logs; the energy that overflows is a real CPU run."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict


def test_tf_aborting_a_ring_all_reduce_on_a_closed_socket_is_a_lost_peer():
    assert verdict(case("1921"))[0] == "nccl-distributed"


def test_libtpu_fatal_error_on_the_chips_is_the_accelerator_halting():
    assert verdict(case("1923")) == ("cuda-runtime", "crashed")


def test_an_energy_that_goes_nan_in_the_progress_lines_is_nan_inf():
    assert verdict(case("1922")) == ("nan-inf", "diverged")


def test_per_batch_spread_below_an_earlier_peak_is_no_blow_up():
    assert verdict(case("0806", "healthy"))[0] is None


_ENERGY = """
import torch
torch.manual_seed(0)
w = torch.tensor([1.0], requires_grad=True)
opt = torch.optim.SGD([w], lr=1.5)  # twice the stable step for this curvature: |w| doubles each step
for step in range(1, 181):
    energy = (w * w).sum()
    opt.zero_grad()
    energy.backward()
    opt.step()
    variance = float(energy.detach()) * 0.01
    print(f"INFO:absl:Step {step:05d}: {float(energy.detach()) - 14.9:.4f} E_h, variance={variance:.4f} E_h^2, pmove=0.52", flush=True)
"""


def test_a_real_energy_that_overflows_and_stays_non_finite_is_nan_inf(tmp_path: Path):
    log = run_script(tmp_path, _ENERGY)
    text = log.read_text()
    assert "nan E_h" in text and "inf E_h" in text  # the run's own arithmetic overflowed, then went NaN
    assert verdict(log) == ("nan-inf", "diverged")
