#!/bin/bash
# Regenerate the torchrun (gloo, CPU) cases. Usage: run_dist.sh CASE (01 02 03 06), OUT=/tmp/trial8
set -u
GEN=${GEN:-$(cd "$(dirname "$0")" && pwd)}
OUT=${OUT:-/tmp/trial8}
WORK=${WORK:-/tmp/t8work}
case "$1" in
01)  # 4 ranks, one console (--tee 3). Rank 3's shard has 8 short records dropped at load, so its last batch
     # of every epoch holds 8 samples (drop_last=False); the token-accuracy log every 1000 steps reshapes
     # with the configured batch size: at step 3000 (= end of epoch 8) it meets the partial batch on rank 3.
    d=$WORK/c01; rm -rf $d; mkdir -p $d $OUT/case01 && cd $d
    python $GEN/prepare_data.py --kind shards --out $d/data --shards 4 --rows 6000 --seed 11 --short 3:8
    torchrun --nproc-per-node 4 --tee 3 $GEN/dist_train.py --data $d/data --epochs 10 --batch 16 --timeout 120 \
        --acc-every 1000 --debug-grads > $OUT/case01/train.log 2>&1
    echo "exit $?" ;;
02)  # 4 ranks, one log file per rank (torchrun --log-dir -r 3). Shard 1 holds 16 rows of uniform random tokens
     # (one batch, row 5600). From epoch 2 on a batch whose loss exceeds 1.5x the previous epoch's mean is
     # skipped with 'continue' (no backward): rank 1 makes one DDP allreduce fewer in that epoch, enters the
     # epoch-end barrier while its peers wait in their last step's allreduce, and all time out (gloo, 120 s).
    d=$WORK/c02; rm -rf $d; mkdir -p $d $OUT/case02 && cd $d
    python $GEN/prepare_data.py --kind shards --out $d/data --shards 4 --rows 8000 --seed 22 --noise 1:5600:16
    torchrun --nproc-per-node 4 --log-dir $OUT/case02/logs -r 3 $GEN/dist_train.py --data $d/data --epochs 5 \
        --batch 16 --timeout 120 --skip-spikes 1.5 --debug-grads > $OUT/case02/launcher.log 2>&1
    echo "exit $?" ;;
03)  # 3 ranks, one console (--tee 3): one sample per .npz file (36000 files); file 0025202 (rank 2's 8401st
     # sample, step ~2101 of 3000) is a truncated partial copy: the DataLoader worker's np.load raises BadZipFile,
     # re-raised in rank 2's main process; the peers fail in their next allreduce; torchrun tears down.
    d=$WORK/c03; rm -rf $d; mkdir -p $d $OUT/case03 && cd $d
    python $GEN/prepare_data.py --kind files --out $d/samples --rows 36000 --seed 33 --truncate 25202
    torchrun --nproc-per-node 3 --tee 3 $GEN/dist_train.py --data $d/samples --format npz --epochs 1 --batch 4 \
        --workers 2 --timeout 120 --eval-every 0 --ckpt-every 500 --debug-grads > $OUT/case03/train.log 2>&1
    echo "exit $?" ;;
06)  # healthy, 2 ranks, plain torchrun console: rank 0 posts metrics every 100 steps from a background thread
     # and syncs each epoch's checkpoint to a local HTTP endpoint that answers 503 to its 20th-23rd POST and
     # its 3rd-4th PUT: the failed posts are logged with their traceback and retried (succeeding on attempt 5),
     # the epoch-3 checkpoint sync is retried (succeeding on attempt 3); the run completes.
    d=$WORK/c06; rm -rf $d; mkdir -p $d $OUT/case06 && cd $d
    python $GEN/prepare_data.py --kind shards --out $d/data --shards 2 --rows 12000 --seed 66
    python $GEN/metrics_server.py 18766 --fail-posts 20-23 --fail-puts 3-4 > $d/server.log 2>&1 & srv=$!
    torchrun --nproc-per-node 2 $GEN/dist_train.py --data $d/data --epochs 8 --batch 16 --timeout 300 \
        --eval-every 500 --metrics-url http://127.0.0.1:18766/api/v1/metrics \
        --sync-url http://127.0.0.1:18766/ckpt/run-6 --debug-grads > $OUT/case06/train.log 2>&1
    echo "exit $?"; kill $srv ;;
esac
