"""case02: an MLflow file store only. The schedule's exponential 'decay' has its ratio inverted
(gamma = (peak/final)**(1/n) instead of (final/peak)**(1/n)), so after the 150-step warmup the lr
grows from 0.05 to ~5 and the loss climbs ~3 orders of magnitude without a NaN; the run ends FINISHED."""

from __future__ import annotations

import os
import subprocess
import sys

from common import PY, fresh, log, stage_script


def main() -> None:
    case = fresh("case02")
    script = stage_script("case02_train.py", "tabular-reg")
    env = dict(os.environ, MLFLOW_ALLOW_FILE_STORE="true")
    uri = f"file://{case}/mlruns"
    with open("/tmp/t13work/case02_console.log", "w") as out:  # console not kept in the case
        rc = subprocess.run([PY, str(script), "--tracking-uri", uri, "--handle", str(case / "HANDLE.txt")],  # noqa: PLW1510 - the generator as it ran
                            cwd=script.parent, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    log(f"exit {rc}")
    if rc != 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
