"""case04: a checkpoint folder of a run SIGKILLed while writing its newest checkpoint.

train.py checkpoints every 200 steps (state.json, then the 'latest' pointer, then model.safetensors
streamed tensor by tensor) and hands each snapshot to an uploader queue that never drains (no
CKPT_UPLOAD_URL): memory grows by one model copy per checkpoint. A memory watchdog playing the
container's limit (set 3.5 model-copies above the RSS after the first checkpoint) SIGKILLs it from
outside when the RSS crosses the limit, which happens while the step-1000 checkpoint is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from common import PY, fresh, install_script, log, rss_mb, wait_for_text


def main() -> None:
    case = fresh("case04")
    script = install_script("case04_train.py", case)
    env = {k: v for k, v in os.environ.items() if k != "CKPT_UPLOAD_URL"}
    env["PYTHONUNBUFFERED"] = "1"
    logf = case / "train.log"
    with open(logf, "w") as out:
        p = subprocess.Popen([PY, str(script)], stdout=out, stderr=subprocess.STDOUT, cwd=case, env=env)
    if not wait_for_text(logf, "checkpoint step 200 saved", timeout=600, proc=p):
        log("first checkpoint never saved")
        sys.exit(1)
    time.sleep(0.05)
    base = rss_mb(p.pid)
    model_mb = (case / "ckpt/step_000200/model.safetensors").stat().st_size / 2**20
    limit = base + 3.5 * model_mb
    log(f"rss after first checkpoint {base:.0f} MB, model {model_mb:.1f} MiB, limit {limit:.0f} MB")
    killed_at = None
    while p.poll() is None:
        r = rss_mb(p.pid)
        if r > limit:
            os.kill(p.pid, signal.SIGKILL)
            killed_at = r
            break
        time.sleep(0.002)
    p.wait()
    log(f"exit {p.returncode}, killed at rss {killed_at}")
    info = {"returncode": p.returncode, "rss_at_kill_mb": killed_at, "limit_mb": limit, "base_mb": base,
            "model_mb": model_mb, "latest": (case / "ckpt/latest").read_text().strip(), "sizes": {}}
    from safetensors import safe_open
    for d in sorted((case / "ckpt").glob("step_*")):
        f = d / "model.safetensors"
        ok = True
        try:
            with safe_open(str(f), "pt") as h:
                for k in h:
                    h.get_tensor(k)
        except Exception as e:  # noqa: BLE001
            ok = f"{type(e).__name__}: {e}"
        info["sizes"][d.name] = {"bytes": f.stat().st_size if f.exists() else None, "loads": ok}
    print(json.dumps(info, indent=1))
    with open("/tmp/t13work/case04_info.json", "w") as f:
        json.dump(info, f, indent=1)
    newest = max((case / "ckpt").glob("step_*")).name
    if p.returncode != -9 or newest != "step_001000" or info["sizes"][newest]["loads"] is True:
        log("unexpected outcome")
        sys.exit(1)


if __name__ == "__main__":
    main()
