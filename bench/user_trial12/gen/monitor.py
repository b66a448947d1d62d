"""Run a job and watch its resident memory, as a cluster scheduler's cgroup accounting does: report it every
--report seconds and SIGKILL the job when its RSS (with children) exceeds --limit-mib."""
import argparse
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--limit-mib", type=int, required=True)
ap.add_argument("--report", type=float, default=15.0)
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd


def tree_rss(pid):
    kids, total = [pid], 0
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False).stdout
        kids += [int(x) for x in out.split()]
    except (OSError, ValueError):
        kids = [pid]  # ps is missing or printed no pids: the job alone
    for k in kids:
        try:
            with open(f"/proc/{k}/status") as f:
                for line in f:
                    if line.startswith("VmRSS"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


p = subprocess.Popen(cmd)
print(f"monitor: job pid {p.pid} started, memory limit {a.limit_mib} MiB RSS", flush=True)
last, peak = 0.0, 0.0
while p.poll() is None:
    r = tree_rss(p.pid)
    peak = max(peak, r)
    now = time.time()
    if r > a.limit_mib:
        print(f"monitor: job pid {p.pid} rss {r:.0f} MiB exceeds the limit of {a.limit_mib} MiB; sending SIGKILL",
              flush=True)
        p.send_signal(signal.SIGKILL)
        break
    if now - last >= a.report:
        print(f"monitor: job pid {p.pid} rss {r:.0f} MiB (peak {peak:.0f} MiB, limit {a.limit_mib} MiB)", flush=True)
        last = now
    time.sleep(0.5)
rc = p.wait()
print(f"monitor: job pid {p.pid} exited with {'signal ' + str(-rc) if rc < 0 else 'status ' + str(rc)}"
      f" (peak rss {peak:.0f} MiB)", flush=True)
sys.exit(128 - rc if rc < 0 else rc)
