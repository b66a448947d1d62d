"""A job launcher, as a shell script, torchrun or a scheduler step is: it starts the training
command, passes its output through, and reports how the child ended in the shell's convention
(128 + signal number for a child killed by a signal, so SIGKILL is 137).

    python launcher.py python classify.py --steps 100000 --out ckpt --save-every 100
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

cmd = sys.argv[1:]
if cmd and cmd[0] == "python":
    cmd[0] = sys.executable
    here = Path(__file__).parent
    if len(cmd) > 1 and not Path(cmd[1]).exists() and (here / cmd[1]).exists():
        cmd[1] = str(here / cmd[1])  # a script shipped next to the launcher, as job bundles do
child = subprocess.Popen(cmd, stdout=sys.stdout, stderr=sys.stderr)
print(f"[launcher] {time.strftime('%Y-%m-%d %H:%M:%S')} started {' '.join(sys.argv[1:])} (pid {child.pid})", flush=True)
rc = child.wait()
if rc < 0:
    sig = signal.Signals(-rc)
    print(f"[launcher] {time.strftime('%Y-%m-%d %H:%M:%S')} child pid {child.pid} was killed by {sig.name}: exited with status {128 - rc}", flush=True)
    sys.exit(128 - rc)
print(f"[launcher] child pid {child.pid} exited with status {rc}", flush=True)
sys.exit(rc)
