"""case08: a run that saves its weights only at the end, stopped by the wall-time limit in run.sh
(coreutils timeout sends SIGTERM after 40 s; Python dies without a word). out/ stays empty."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from common import GEN, PY, fresh, install_script, log


def main() -> None:
    case = fresh("case08")
    install_script("case08_train.py", case)
    shutil.copy(GEN / "case08_config.yaml", case / "config.yaml")
    shutil.copy(GEN / "case08_run.sh", case / "run.sh")
    os.chmod(case / "run.sh", 0o755)
    env = dict(os.environ, PATH=os.path.dirname(PY) + os.pathsep + os.environ["PATH"])
    rc = subprocess.run(["bash", str(case / "run.sh")], cwd=case, env=env).returncode  # noqa: PLW1510 - the generator as it ran
    log(f"run.sh exit {rc}")
    text = (case / "train.log").read_text()
    if rc != 124 or "saved out/model.safetensors" in text or any((case / "out").iterdir()):
        log("unexpected outcome")
        sys.exit(1)


if __name__ == "__main__":
    main()
