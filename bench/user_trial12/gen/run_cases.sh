#!/bin/bash
# Regenerate one case of the twelfth trial. Usage: run_cases.sh NN   (OUT=/work/trial12, WORK=/tmp/t12work)
set -u
GEN=${GEN:-$(cd "$(dirname "$0")" && pwd)}
T8="${T8:-$(cd "$(dirname "$0")/../../user_trial8/gen" && pwd)}"  # trial 8's common.py and metrics_server.py
export PYTHONPATH="$GEN:$T8${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/work/trial12}
WORK=${WORK:-/tmp/t12work}
d=$WORK/c$1; rm -rf $d; mkdir -p $d $OUT/case$1 && cd $d
case "$1" in
01)  # stalled (hung): 2 ranks, one console (--tee 3). Rank 0 writes checkpoints from a background thread
     # (--ckpt-async) that takes state_lock then meta_lock, while the main thread's per-step metadata snapshot takes
     # meta_lock then state_lock: lock-order inversion, so rank 0 deadlocks at its first async save (step 1200);
     # rank 1 waits in the next step's DDP allreduce until the 60 s gloo timeout, dies; torchrun SIGTERMs rank 0
     # (faulthandler dumps both of its threads blocked in lock acquire).
    python $GEN/prep.py --out $d/data --shards 4 --rows 6000 --seed 11 --noise 0.05 --branch 4
    torchrun --nproc-per-node 2 --tee 3 $GEN/train12.py --data $d/data --steps 3000 --timeout 60 \
        --eval-every 250 --ckpt-every 1200 --ckpt-async --debug-grads > $OUT/case01/train.log 2>&1
    echo "exit $?" ;;
02)  # healthy (completed): single process. Scary but harmless: the legacy GradScaler FutureWarning printed as a
     # WARNING with its traceback (GradScaler on CPU: loss scaling only), the tracker endpoint comes up 40 s after the start so
     # the first uploads fail with ConnectionRefusedError tracebacks and are retried (one dropped), one short batch per data pass
     # skipped (--skip-short); the run completes.
    python $GEN/prep.py --out $d/data --shards 3 --rows 4010 --seed 22 --noise 0.05 --branch 4
    ( sleep 40; exec python $T8/metrics_server.py 18812 ) > $d/server.log 2>&1 & srv=$!
    python $GEN/train12.py --data $d/data --steps 4000 --eval-every 250 --ckpt-every 1000 --amp \
        --tracker-url http://127.0.0.1:18812/api/metrics --skip-short \
        --debug-grads > $OUT/case02/train.log 2>&1
    echo "exit $?"; kill $srv ;;
03)  # nan-inf (diverged, completed with NaN): single process; --loss-impl fast_half computes log-sum-exp by hand in
     # float16 with no max subtraction. Shards 4-7 are a cleaner, near-deterministic mix: 16 steps into shard 4
     # (step ~1516 of 4000) the model's confident logits exceed 11.09, exp() overflows to inf in fp16: loss inf,
     # then grad_norm nan and loss nan for the remaining ~2500 steps; no guard stops the run; it 'completes'.
    python $GEN/prep.py --out $d/data --shards 8 --rows 6000 --noise 0.02 --branch 2 --seed 5
    python $GEN/prep.py --out $d/clean --shards 8 --rows 6000 --noise 0.0 --branch 1 --seed 6
    for i in 4 5 6 7; do cp $d/clean/train-0000$i-of-00008.npy $d/data/; done; rm -r $d/clean
    python $GEN/train12.py --data $d/data --steps 4000 --loss-impl fast_half --wd 0 --lr 2e-3 \
        --eval-every 250 --ckpt-every 1000 --debug-grads > $OUT/case03/train.log 2>&1
    echo "exit $?" ;;
04)  # process-crash (crashed): 3 ranks, one log file per rank (torchrun --log-dir -r 3) + launcher.log. Packed
     # shards are read through an mmap with libc memmove (ctypes); the .idx of shard 7 (rank 1's third shard) has
     # one corrupt offset (+2^40) at row 7200: rank 1's memmove reads unmapped memory at step ~1450 of 1600:
     # SIGSEGV (faulthandler 'Fatal Python error: Segmentation fault' in rank 1's stderr); ranks 0 and 2 fail in
     # the allreduce (gloo 'Connection closed by peer'); torchrun reports rank 1 exitcode -11.
    python $GEN/prep.py --out $d/data --shards 9 --rows 8000 --seed 44 --format packed
    python -c "import numpy as np; f='$d/data/train-00007-of-00009.idx'; x=np.fromfile(f, dtype=np.int64); x[7200]+=2**40; x.tofile(f)"
    torchrun --nproc-per-node 3 --log-dir $OUT/case04/logs -r 3 $GEN/train12.py --data $d/data --format packed \
        --steps 1600 --timeout 120 --eval-every 200 --ckpt-every 400 --debug-grads > $OUT/case04/launcher.log 2>&1
    echo "exit $?" ;;
05)  # oom (crashed): single process under a supervising memory monitor (limit 1000 MiB RSS, SIGKILL as a scheduler's
     # cgroup would). --train-acc keeps every step's logits tensor (16x32x256 float32 = 0.5 MB, with its graph) for an
     # epoch-end train accuracy: RSS (logged every 50 steps) grows ~0.5 MB per step until the monitor kills the job.
    python $GEN/prep.py --out $d/data --shards 4 --rows 8000 --seed 55 --noise 0.05 --branch 4
    python $GEN/monitor.py --limit-mib 1000 --report 15 -- python $GEN/train12.py --data $d/data --steps 4000 \
        --train-acc --eval-every 250 --ckpt-every 1000 --debug-grads > $OUT/case05/train.log 2>&1
    echo "exit $?" ;;
06)  # recovered: single process; the first attempt is preempted by SIGKILL after 35 s (timeout -s KILL, no
     # handler: the log just stops); the wrapper resubmits with --resume, which loads the newest checkpoint (by step
     # number), fast-forwards the data and completes all 5000 steps.
    python $GEN/prep.py --out $d/data --shards 4 --rows 8000 --seed 66 --noise 0.05 --branch 4
    {
      echo "job attempt 1 starting"
      timeout -s KILL 35 python $GEN/train12.py --data $d/data --steps 5000 --eval-every 250 --ckpt-every 500 \
          --debug-grads
      rc=$?; echo "job attempt 1 exited with status $rc; requeueing (attempt 2 of 3)"
      python $GEN/train12.py --data $d/data --steps 5000 --eval-every 250 --ckpt-every 500 --resume --debug-grads
      echo "job attempt 2 exited with status $?"
    } > $OUT/case06/train.log 2>&1
    echo "exit $?" ;;
07)  # io-checkpoint (crashed): 2 ranks, plain torchrun console. Checkpoints are written to a staging dir on
     # /dev/shm (tmpfs) and then os.rename()d into the checkpoint dir on the root filesystem: the first save
     # (step 1000 of 3000) fails with OSError [Errno 18] Invalid cross-device link on rank 0; rank 1 fails in the
     # allreduce (Connection closed by peer); torchrun tears down.
    rm -rf /dev/shm/t12stage
    python $GEN/prep.py --out $d/data --shards 4 --rows 6000 --seed 77 --noise 0.05 --branch 4
    torchrun --nproc-per-node 2 $GEN/train12.py --data $d/data --steps 3000 --timeout 120 --eval-every 250 \
        --ckpt-every 1000 --ckpt-staging /dev/shm/t12stage --debug-grads > $OUT/case07/train.log 2>&1
    echo "exit $?"; rm -rf /dev/shm/t12stage ;;
08)  # data-pipeline (crashed): single process, 2 DataLoader workers over 20 streamed shards (worker 0 reads the even
     # ones). Shard 18 was re-exported with 65-token records (the others 33); shards hold 1010 rows (not a multiple
     # of 16), so worker 0's batch straddling shards 16 and 18 mixes lengths: 'stack expects each tensor to be equal
     # size' inside DataLoader worker process 0 at step ~1136 of 1500.
    python $GEN/prep.py --out $d/data --shards 20 --rows 1010 --seed 88 --noise 0.05 --branch 4
    python $GEN/prep.py --out $d/re --shards 20 --rows 1010 --seed 89 --noise 0.05 --branch 4 --seq 65 --only 18
    cp $d/re/train-00018-of-00020.npy $d/data/; rm -r $d/re
    python $GEN/train12.py --data $d/data --steps 1500 --workers 2 --eval-every 250 --ckpt-every 500 \
        --debug-grads > $OUT/case08/train.log 2>&1
    echo "exit $?" ;;
esac
