#!/bin/bash
# Regenerate the torchrun (gloo, CPU) cases. Usage: run_dist.sh CASE (01 06 07 08), OUT=/tmp/trial10
set -u
GEN=${GEN:-$(cd "$(dirname "$0")" && pwd)}
# common.py, prepare_data.py and metrics_server.py are trial 8's, unchanged: shared, not copied
T8=$(cd "$GEN/../../user_trial8/gen" && pwd)
export PYTHONPATH="$T8${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/trial10}
WORK=${WORK:-/tmp/t10work}
case "$1" in
01)  # 3 ranks, one console (--tee 3), under an address-space limit (prlimit --as, as a cluster's ulimit -v).
     # Rank 0 keeps the logits of 1536 held-out rows (50 MB) at every eval (every 200 steps) for a temperature
     # calibration at the end: its address space grows by 50 MB per eval until an allocation fails
     # (DefaultCPUAllocator: can't allocate memory) at an eval thousands of steps in; rank 0 dies, its peers fail
     # in their next collective; torchrun tears down.
    d=$WORK/c01; rm -rf $d; mkdir -p $d $OUT/case01 && cd $d
    python $T8/prepare_data.py --kind shards --out $d/data --shards 3 --rows 12000 --seed 11
    prlimit --as=$((1600*1024*1024)) torchrun --nproc-per-node 3 --tee 3 $GEN/dist_train.py --data $d/data \
        --epochs 4 --batch 16 --workers 0 --timeout 120 --eval-every 200 --calib-rows 1536 --debug-grads \
        > $OUT/case01/train.log 2>&1
    echo "exit $?" ;;
06)  # 3 ranks, one log file per rank (torchrun --log-dir -r 3) + launcher.log. Each rank tracks the best loss on
     # its own 64-row validation slice and, on a new best, all_gathers the per-rank values: the condition is
     # rank-dependent, so at the first eval where one rank improves and another does not, the ranks call
     # different collectives (all_gather vs the DDP gradient allreduce of the next step): gloo error / timeout.
    d=$WORK/c06; rm -rf $d; mkdir -p $d $OUT/case06 && cd $d
    python $T8/prepare_data.py --kind shards --out $d/data --shards 3 --rows 12000 --seed 66
    torchrun --nproc-per-node 3 --log-dir $OUT/case06/logs -r 3 $GEN/dist_train.py --data $d/data --epochs 3 \
        --batch 16 --timeout 90 --eval-every 200 --track-best --debug-grads > $OUT/case06/launcher.log 2>&1
    echo "exit $?" ;;
07)  # healthy, 2 ranks, plain torchrun console: GradScaler FutureWarning/UserWarning (CUDA not available),
     # the tracker endpoint starts 25 s after the run: rank 0's uploader thread logs 'tracker post failed' with
     # ConnectionRefusedError tracebacks, dies after 3 attempts and is restarted; shard 1 holds 48 random rows:
     # 3 'loss spike' warnings (batch kept); the run completes.
    d=$WORK/c07; rm -rf $d; mkdir -p $d $OUT/case07 && cd $d
    python $T8/prepare_data.py --kind shards --out $d/data --shards 2 --rows 8000 --seed 77 --noise 1:3000:48
    ( sleep 25; exec python $T8/metrics_server.py 18777 ) > $d/server.log 2>&1 & srv=$!
    torchrun --nproc-per-node 2 $GEN/dist_train.py --data $d/data --epochs 5 --batch 16 --timeout 300 \
        --eval-every 250 --amp --tracker-url http://127.0.0.1:18777/api/v1/metrics --spike-warn 1.6 \
        --debug-grads > $OUT/case07/train.log 2>&1
    echo "exit $?"; kill $srv ;;
08)  # 2 ranks, one console (--tee 3). Shard 3 of 4 was written by a newer tokenizer with 264 ids (ids 256-263 appear,
     # ~3% of tokens); rank 1 reads shards 1 and 3 in order, so its first batch from shard 3 (step 1501 of 6000) has ids
     # beyond the 256-row embedding: IndexError 'index out of range in self' in rank 1's forward; rank 0 fails in the
     # allreduce; torchrun tears down.
    d=$WORK/c08; rm -rf $d; mkdir -p $d $OUT/case08 && cd $d
    python $T8/prepare_data.py --kind shards --out $d/data --shards 4 --rows 24000 --seed 88
    python $T8/prepare_data.py --kind shards --out $d/newtok --shards 4 --rows 24000 --seed 89 --vocab 264
    cp $d/newtok/train-00003-of-00004.npy $d/data/train-00003-of-00004.npy; rm -r $d/newtok
    torchrun --nproc-per-node 2 --tee 3 $GEN/dist_train.py --data $d/data --epochs 2 --batch 16 --timeout 120 \
        --eval-every 500 --debug-grads > $OUT/case08/train.log 2>&1
    echo "exit $?" ;;
esac
