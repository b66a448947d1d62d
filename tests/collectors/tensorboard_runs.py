"""Real trainings (tests/collectors/training.py) logged by torch's own SummaryWriter.

    python -m tests.collectors.tensorboard_runs OUT KIND...

Each KIND (nan, diverging, healthy) writes OUT/KIND/events.out.tfevents.* as a PyTorch script
does: the training loss as 'Loss/train', the validation loss through add_scalars('Loss', {'val':
...}) (a child directory Loss_val), 'grad_norm', 'lr' and throughput; its stdout, which names the
step where the run stopped, goes to OUT/KIND.out.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TAGS = {"train_loss": "Loss/train", "grad_norm": "grad_norm", "learning_rate": "lr", "samples_per_second": "throughput/samples_per_sec"}


def write(out: Path, kind: str) -> None:
    from torch.utils.tensorboard import SummaryWriter  # here: importing this module for make() stays light

    from tests.collectors.training import train

    writer = SummaryWriter(str(out / kind))

    def log(step: int, values: dict[str, float]) -> None:
        for k, v in values.items():
            if k == "eval_loss":
                writer.add_scalars("Loss", {"val": v}, step)
            else:
                writer.add_scalar(TAGS[k], v, step)

    with open(out / f"{kind}.out", "w") as f:
        train(kind, log, f)
    writer.close()


if __name__ == "__main__":
    for kind in sys.argv[2:]:
        write(Path(sys.argv[1]), kind)


def make(root: Path, *kinds: str) -> dict[str, Path]:
    """Write the runs in a child process (torch and tensorboard stay out of the test process); {kind: run dir}."""
    here = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "tests.collectors.tensorboard_runs", str(root), *kinds], cwd=here,
                   env=dict(os.environ), check=True, capture_output=True, timeout=300)
    return {k: root / k for k in kinds}


def stop_step(run: Path) -> int:
    """The step the training itself said it stopped at ('loss is nan at step 25')."""
    m = re.search(r"at step (\d+), stopping", (run.parent / f"{run.name}.out").read_text())
    assert m, "the training did not stop"
    return int(m[1])
