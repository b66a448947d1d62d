"""case05: TensorBoard event files only. At the batch-size ramp (epoch 6) train.py rebuilds both
loaders with make_loader(d, bs), whose default is shuffle=True, so the validation loader is now
shuffled while accuracy compares predictions with val targets in dataset order: Accuracy/val drops
to chance (~0.10) while Loss/train keeps falling and Loss/val (computed per batch) does not move."""

from __future__ import annotations

import subprocess
import sys

from common import PY, fresh, log, stage_script


def main() -> None:
    case = fresh("case05")
    script = stage_script("case05_train.py", "digits")
    with open("/tmp/t13work/case05_console.log", "w") as out:
        rc = subprocess.run([PY, str(script), "--logdir", str(case / "runs" / "exp07")], cwd=script.parent,  # noqa: PLW1510 - the generator as it ran
                            stdout=out, stderr=subprocess.STDOUT).returncode
    log(f"exit {rc}")
    if rc != 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
