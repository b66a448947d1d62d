"""Write /work/trial13-key/key.json from what the generators really produced (run after run_all.sh)."""

from __future__ import annotations

import csv
import glob
import json
import math
import os
from pathlib import Path

OUT = Path(os.environ.get("T13_OUT", "/work/trial13"))
KEY = Path(os.environ.get("T13_KEY", "/work/trial13-key"))


def find_line(path: Path, needle: str, last: bool = False) -> dict:
    hit = None
    for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if needle in line:
            hit = {"file": str(path.relative_to(OUT)), "line": i, "text": line.rstrip()}
            if not last:
                break
    if hit is None:
        raise SystemExit(f"{needle!r} not in {path}")
    return hit


def last_line(path: Path) -> dict:
    lines = path.read_text(errors="replace").splitlines()
    return {"file": str(path.relative_to(OUT)), "line": len(lines), "text": lines[-1].rstrip()}


def files_of(case: Path) -> dict:
    out = {}
    for p in sorted(case.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(case))] = p.stat().st_size
    return out


def case01() -> dict:
    case = OUT / "case01"
    sweep = case / "sweep"
    with open(case / "grid.csv") as f:
        rows = list(csv.DictReader(f))
    failed, missing, completed, decisive = {}, [], [], {}
    for r in rows:
        name = f"lr{r['lr']}_bs{r['batch_size']}_s{r['seed']}"
        d = sweep / name
        if not d.exists():
            missing.append({"lr": float(r["lr"]), "batch_size": int(r["batch_size"]), "seed": int(r["seed"]),
                            "would_be_folder": name})
            continue
        log = d / "train.log"
        text = log.read_text()
        if (d / "results.json").exists():
            completed.append(name)
            continue
        if "sweep-watchdog" in text:
            failed[name] = "oom"
            decisive[name] = find_line(log, "sweep-watchdog")
        elif "FloatingPointError" in text:
            failed[name] = "nan-inf"
            decisive[name] = [find_line(log, "non-finite loss"), find_line(log, "FloatingPointError:")]
        elif "ValueError" in text:
            failed[name] = "config-error"
            decisive[name] = find_line(log, "ValueError:")
        else:
            failed[name] = "UNKNOWN"
    killed = [n for n, c in failed.items() if c == "oom"]
    return {
        "kind": "triage-runs sweep folder: sweep/ (one folder per run) + grid.csv (24 planned cells) + train.py",
        "run_status": "crashed",
        "primary_class": "config-error",
        "acceptable": ["nan-inf", "oom"],
        "note": "a sweep: the per-run classes below are the answer; the biggest group (2 runs) is config-error",
        "failed": failed,
        "failed_status": {n: "crashed" for n in failed},
        "missing": missing,
        "completed": completed,
        "decisive": decisive,
        "scenario": (
            "24 planned cells lr {0.003,0.01,0.03,0.08} x batch_size {32,128,512} x seed {1,2} of one real PyTorch "
            "script (tanh MLP regressor, SGD momentum 0.9, linear lr scaling lr*bs/128 guarded by max_lr 0.25), "
            "launched 2 at a time by a launcher with a node-memory watchdog. (1) lr 0.08 x bs 512, both seeds: the "
            "scaled lr 0.32 > max_lr 0.25 and train.py raises ValueError before training (config-error, 2 runs, one "
            "fingerprint). (2) lr 0.03 x bs 512 seed 2: scaled lr 0.12 sits at the stability edge; the loss blows up "
            "over epochs 1-4 (to ~1e24) and is NaN at step 75, train.py raises FloatingPointError (seed 1 of the same "
            "cell completes). (3) " + ", ".join(killed) + ": an ordinary cell SIGKILLed mid-epoch by the launcher's "
            "watchdog while another tenant's process took 4 GiB of node memory (transient: the same lr/bs with the "
            "other seed completed; the watchdog appended its line to the run's train.log). "
            "(4) 2 cells never launched (submission skipped), no folder."),
        "recovery": {"config-error": "lower lr or batch size for that cell (or raise max_lr deliberately)",
                     "nan-inf": "lower lr for bs 512 (scaled lr 0.12 is at the edge), add warmup/clipping",
                     "oom": "transient node memory pressure: relaunch the cell unchanged",
                     "missing": "launch the 2 cells"},
        "files": {"runs": len(list(sweep.iterdir())), "grid_rows": len(rows)},
    }


def case02() -> dict:
    case = OUT / "case02"
    uri, run_id = (case / "HANDLE.txt").read_text().split()
    run_dir = Path(glob.glob(str(case / "mlruns" / "*" / run_id))[0])

    def series(name):
        out = []
        for line in (run_dir / "metrics" / name).read_text().splitlines():
            _ts, val, step = line.split()
            out.append((int(step), float(val)))
        return out

    tl, lr, vl = series("train_loss"), series("lr"), series("val_loss")
    params = {p.name: p.read_text() for p in (run_dir / "params").iterdir()}
    meta = (run_dir / "meta.yaml").read_text()
    status = next(l for l in meta.splitlines() if l.startswith("status:"))
    min_step, min_loss = min(tl[:900], key=lambda t: t[1])
    max_step, max_loss = max(tl, key=lambda t: t[1])
    nonfinite = [s for s, v in tl if not math.isfinite(v)]
    return {
        "kind": "MLflow file store only: mlruns/ + HANDLE.txt (tracking URI, run id)",
        "handle": {"tracking_uri": uri, "run_id": run_id, "experiment_dir": run_dir.parent.name},
        "run_status": "diverged",
        "primary_class": "optimization-divergence",
        "acceptable": ["config-error"],
        "decisive": {
            "metric lr": f"rises after the warmup ends at step 150 ({lr[150][1]:.4g} at step 150, "
                         f"{lr[750][1]:.4g} at step 750, {lr[-1][1]:.4g} at step {lr[-1][0]}) although params say "
                         f"lr={params['lr']} final_lr={params['final_lr']} schedule={params['schedule']}",
            "metric train_loss": f"min {min_loss:.4g} at step {min_step}, climbs to {max_loss:.4g} at step {max_step} "
                                 f"(last {tl[-1][1]:.4g} at step {tl[-1][0]}); no NaN/inf ({len(nonfinite)} non-finite)",
            "metric val_loss": [(s, round(v, 4)) for s, v in vl],
            "run status": f"meta.yaml {status} (3 = FINISHED): the run ended normally with bad metrics",
        },
        "scenario": ("MLP regressor (tanh, MSE), SGD nesterov momentum 0.9, grad clip 1.0, linear warmup 150 steps to "
                     "0.05 then an 'exponential decay to final_lr 5e-4' whose ratio is inverted: gamma = "
                     "(peak/final)**(1/n) > 1, so lr grows 100x to ~5 by the last step. Loss falls to ~0.1 then climbs "
                     "~3 orders of magnitude (clipping keeps it finite); val_r2 goes from 0.94 to about -30. The script "
                     "ends the run normally (FINISHED). Only the tracking store is kept; no console log."),
        "fix": "gamma = (final_lr/peak)**(1/(total-warmup)) (or a scheduler); rerun from scratch or from an "
               "early checkpoint (none were logged)",
        "files": files_of(case),
    }


def case03() -> dict:
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from wandb_read import history
    case = OUT / "case03"
    f = glob.glob(str(case / "wandb" / "offline-run-*" / "*.wandb"))[0]
    rows = [h for h in history(f) if "_step" in h and "train/loss" in h]
    first = next(h for h in rows if not math.isfinite(h["train/loss"]))
    prev = [h for h in rows if h["_step"] < first["_step"]][-3:]
    exit_recs = [h for h in history(f) if h.get("_record") == "exit"]
    return {
        "kind": "W&B offline run folder: wandb/offline-run-*/ (run-*.wandb, files/, logs/), nothing printed",
        "run_dir": str(Path(f).parent.relative_to(OUT)),
        "run_status": "diverged",
        "primary_class": "nan-inf",
        "acceptable": ["data-pipeline"],
        "decisive": {
            "metric train/loss": f"finite and smooth up to step {prev[-1]['_step']} "
                                 "(" + ", ".join("{:.3f}".format(h["train/loss"]) for h in prev) + "), then "
                                 f"{first['train/loss']} at step {first['_step']} and NaN for every later step",
            "metric train/grad_norm": f"~{prev[-1]['train/grad_norm']:.2f} at step {prev[-1]['_step']}, "
                                      f"{first['train/grad_norm']} at step {first['_step']}: no growth before (not divergence)",
            "val/loss, val/mae_units": "NaN at every epoch end (steps 375, 750, 1125)",
            "exit": f"{exit_recs[0]['text'].strip() if exit_recs else '?'} (exit code 0: the run finished, with NaN)",
        },
        "scenario": ("Demand regression on log(units): target = torch.log(units) and 3 of 24,000 training rows sold 0 "
                     "units (Poisson). The first batch holding one (step 215 of 1,125 with seed 9) has target -inf: "
                     "loss = inf, gradients NaN, AdamW writes NaN into every weight, loss NaN ever after. "
                     "OneCycle lr was only 0.0049 and rising; the loss was ~0.25 and grad_norm ~1 the step before. "
                     "The script logs only to wandb (offline) and finishes normally."),
        "fix": "use log1p(units) (or clamp/filter zero-sale rows, as the validation export does); add a "
               "non-finite-loss guard; rerun (the weights after step 214 are NaN)",
        "files": {k: v for k, v in files_of(case).items()},
    }


def case04() -> dict:
    case = OUT / "case04"
    info = json.loads(Path("/tmp/t13work/case04_info.json").read_text())
    log = case / "train.log"
    saved = [find_line(log, f"checkpoint step {s} saved") for s in (200, 400, 600, 800)]
    full = info["sizes"]["step_000800"]["bytes"]
    assert all(info["sizes"][f"step_{s:06d}"]["loads"] is True for s in (200, 400, 600, 800))
    return {
        "kind": "checkpoint folder: ckpt/ (step_000200..step_001000, latest) + train.log + train.py",
        "run_status": "crashed",
        "primary_class": "oom",
        "acceptable": ["process-crash", "io-checkpoint"],
        "usable_checkpoint": f"ckpt/step_000800 (step 800; model.safetensors {full:,} bytes, loads)",
        "not_usable": "ckpt/step_001000: model.safetensors truncated at "
                      f"{info['sizes']['step_001000']['bytes']:,} of {full:,} bytes (header + MLP tensors, the "
                      "item table missing); its state.json exists and ckpt/latest names it",
        "latest_pointer": info["latest"],
        "decisive": {
            "train.log last line": last_line(log),
            "memory growth": [s["text"] for s in saved],
            "ckpt/latest": f"'{info['latest']}' -> the truncated checkpoint (latest is written before the weights)",
        },
        "scenario": ("Click model (frozen 100k x 64 item table + small MLP), checkpoints every 200 steps: state.json, "
                     "then ckpt/latest, then model.safetensors streamed tensor by tensor with fsync. Each checkpoint "
                     "also keeps a full clone of the weights in an uploader queue that never drains "
                     "(CKPT_UPLOAD_URL unset, logged as a WARNING at start), so RSS grows ~25 MB per checkpoint "
                     "(see the 'checkpoint step N saved ... N pending upload; rss' lines). A memory watchdog standing in for the "
                     f"container limit ({info['limit_mb']:.0f} MB, 3.5 model copies above the RSS after the first "
                     f"checkpoint) SIGKILLed the process from outside at {info['rss_at_kill_mb']:.0f} MB while it "
                     "cloned the item table during the step-1000 save: no traceback, the log ends at 'saving "
                     "checkpoint step 1000'. Steps 200-800 load; step 1000 is cut."),
        "fix": "resume from step_000800 (re-point latest to it); drop the pending-upload snapshots when uploads are "
               "disabled (or bound the queue); write weights to a temp name and rename, and update latest last",
        "kill": info,
        "files": {"train.log": log.stat().st_size, "ckpt": {k: v for k, v in files_of(case).items() if k.startswith("ckpt")}},
    }


def case05() -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    case = OUT / "case05"
    d = case / "runs" / "exp07"
    ea = EventAccumulator(str(d))
    ea.Reload()
    sc = {t: [(e.step, round(e.value, 4)) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}
    acc = sc["Accuracy/val"]
    drop = next(i for i in range(1, len(acc)) if acc[i][1] < 0.5 * acc[i - 1][1])
    return {
        "kind": "TensorBoard event file only: runs/exp07/events.out.tfevents.*",
        "run_status": "degraded",
        "primary_class": "evaluation-mismatch",
        "acceptable": [],
        "decisive": {
            "Accuracy/val": f"{acc[drop - 1][1]} at step {acc[drop - 1][0]} -> {acc[drop][1]} at step {acc[drop][0]} "
                            f"and ~0.10 (chance for 10 classes) for the rest: {acc}",
            "batch_size": f"{sc['batch_size']}: doubles at the same epoch",
            "Loss/val": f"{sc['Loss/val']}: no jump at the drop, only the slow rise of mild overfitting that began epochs earlier",
            "Loss/train": f"keeps falling: first {sc['Loss/train'][0]}, at the drop ~"
                          f"{[v for s, v in sc['Loss/train'] if s <= acc[drop][0]][-1]}, last {sc['Loss/train'][-1]}",
            "Accuracy/train": sc["Accuracy/train"],
        },
        "scenario": ("10-class MLP on synthetic 256-d data. At the batch-size ramp (epoch 6) train.py rebuilds both "
                     "loaders with make_loader(d, bs), whose default is shuffle=True, so the validation loader is "
                     "now shuffled while val accuracy compares the concatenated predictions with val targets in "
                     "dataset order: Accuracy/val falls from ~0.75 to ~0.10 in one epoch while Loss/val (computed per "
                     "batch against the batch's own labels) does not move and Loss/train keeps falling. The model is "
                     "fine; the metric is wrong. Not overfitting: val loss barely changes at the drop."),
        "fix": "make_loader(val, bs, shuffle=False) (or collect targets alongside predictions)",
        "files": files_of(case),
    }


def case06() -> dict:
    case = OUT / "case06"
    log = case / "train.log"
    return {
        "kind": "completed run folder: train.log, config.yaml, train.py, metrics.json, ckpt/{last,final}.safetensors",
        "run_status": "completed",
        "primary_class": None,
        "acceptable": [],
        "decisive": {"completion": find_line(log, "training complete"),
                     "metrics.json": json.loads((case / "metrics.json").read_text())},
        "harmless": [find_line(log, "DefaultCPUAllocator"), find_line(log, "FileNotFoundError"),
                     find_line(log, "Detected call of `lr_scheduler.step()`"),
                     find_line(log, "invalid value encountered in divide"), find_line(log, "val_macro_f1 nan")],
        "scenario": ("Topic classifier (hashed bag-of-tokens MLP) that completes 5 epochs at val_acc ~0.996. Scary "
                     "lines, all harmless: a real 64 GiB DefaultCPUAllocator 'can't allocate memory' RuntimeError, "
                     "caught (exact features over a 1,048,576-token vocabulary) with a fallback to 4096 hashed buckets; "
                     "a FileNotFoundError traceback logged at WARNING when the optional resume finds no "
                     "ckpt/last.safetensors (fresh start); torch's lr_scheduler-before-optimizer UserWarning; numpy's "
                     "'invalid value encountered in divide' and val_macro_f1 nan in epoch 1 (the rare class not yet "
                     "predicted: 0/0 precision), finite from epoch 2."),
        "files": files_of(case),
    }


def case07() -> dict:
    case = OUT / "case07"
    log = case / "train.log"
    return {
        "kind": "run folder after an automatic restart: train.log (both launches appended), nohup.out, run.sh, "
                "train.py, ckpt/step_<N>/",
        "run_status": "recovered",
        "primary_class": "io-checkpoint",
        "acceptable": ["process-crash"],
        "decisive": {
            "last step of launch 1": find_line(log, "step 1600/3000"),
            "newest checkpoint before the kill": find_line(log, "saved checkpoint ckpt/step_1500"),
            "restart": find_line(log, "exited with code 137"),
            "resume": find_line(log, "resumed from ckpt/step_750"),
            "steps redone": find_line(log, "step 775/3000", last=True),
            "nohup.out": find_line(case / "nohup.out", "Killed"),
            "completion": find_line(log, "training complete"),
        },
        "scenario": ("Attempt 1 trained to step ~1600 with checkpoints every 250 steps (ckpt/step_250 ... step_1500, "
                     "unpadded names) and was SIGKILLed from outside (a preemption; bash reports 'Killed', exit 137). "
                     "run.sh relaunched 'train.py --resume auto', which picks sorted(glob('ckpt/step_*'))[-1]: a "
                     "lexicographic sort, so step_750 beats step_1500. The run resumed at step 750, redid 850 steps "
                     "(~35% of the run) and overwrote step_1000..1500; it completed. Nothing crashed in the end, but "
                     "the resume loaded the wrong checkpoint and will do so again at any restart past step 1000."),
        "fix": "sort checkpoints by the numeric step (or zero-pad names / keep a latest pointer); the finished "
               "model itself is fine (it trained 3000 steps from step 750's weights); only compute was lost",
        "files": {"train.log": log.stat().st_size, "nohup.out": (case / "nohup.out").stat().st_size,
                  "ckpt": sorted(p.name for p in (case / "ckpt").iterdir())},
    }


def case08() -> dict:
    case = OUT / "case08"
    log = case / "train.log"
    return {
        "kind": "run folder: train.log, run.sh, config.yaml, train.py, out/ (empty)",
        "run_status": "crashed",
        "primary_class": "process-crash",
        "acceptable": ["pipeline-orchestration", "stalled"],
        "usable_checkpoint": None,
        "decisive": {"run.sh": find_line(case / "run.sh", "timeout 40s"),
                     "first line": find_line(log, "config"),
                     "last line": last_line(log),
                     "out/": "empty: train.py saves out/model.safetensors only after the last epoch"},
        "scenario": ("run.sh runs train.py under 'timeout 40s' (coreutils: SIGTERM after 40 s); a 30-epoch run needs "
                     "far longer. Python dies on SIGTERM without a traceback, so train.log just stops mid-epoch ~40 s "
                     "after its first line. train.py checkpoints nothing until the end, so out/ is empty and nothing "
                     "can be resumed; all compute is lost."),
        "fix": "raise the wall-time budget (or fewer epochs), save every epoch and on SIGTERM, then resume",
        "files": files_of(case),
    }


def main() -> None:
    key = {"_about": ("Answer key of user trial 13 (evidence that is not a log). Cases in /work/trial13/caseNN, built "
                      "by gen/run_all.sh from real CPU training runs; every failure really happened. Line numbers "
                      "are 1-based; 'file' paths are relative to /work/trial13."),
           "_build_time": Path("/tmp/t13work/build_time.txt").read_text().strip()
           if Path("/tmp/t13work/build_time.txt").exists() else None}
    for fn in (case01, case02, case03, case04, case05, case06, case07, case08):
        key[fn.__name__] = fn()
    KEY.mkdir(parents=True, exist_ok=True)
    (KEY / "key.json").write_text(json.dumps(key, indent=1, default=str) + "\n")
    print(f"wrote {KEY / 'key.json'}")


if __name__ == "__main__":
    main()
