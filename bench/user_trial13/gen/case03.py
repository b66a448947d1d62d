"""case03: a W&B offline run. Log-units regression: the target is torch.log(units) and a few rows
sold 0 units, so the first batch holding one (step 215 with seed 9) has target -inf: loss inf,
grad NaN, weights NaN, NaN for the rest of the run. The script prints nothing; it finishes (exit 0)."""

from __future__ import annotations

import os
import subprocess
import sys

from common import PY, fresh, log, stage_script


def main() -> None:
    case = fresh("case03")
    script = stage_script("case03_train.py", "demand-forecast")
    env = dict(os.environ, WANDB_MODE="offline")
    env.pop("WANDB_API_KEY", None)
    with open("/tmp/t13work/case03_console.log", "w") as out:
        rc = subprocess.run([PY, str(script), "--dir", str(case)], cwd=script.parent, env=env, stdout=out,  # noqa: PLW1510 - the generator as it ran
                            stderr=subprocess.STDOUT).returncode
    log(f"exit {rc}")
    if rc != 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
