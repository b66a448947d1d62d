#!/bin/bash
# Regenerate the torchrun (gloo, CPU) cases. Usage: run_dist.sh CASE (01 04 10), OUT=/tmp/trial5
set -u
GEN=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/trial5}
WORK=${WORK:-/tmp/t5work}
case "$1" in
04)  # 4 ranks, one console (torchrun --tee): rank 2 reads a truncated JSONL record in its 9th shard
    d=$WORK/c04; rm -rf $d; mkdir -p $d $OUT/case04 && cd $d
    python $GEN/make_shards.py --out $d/data --world 4 --shards-per-rank 10 --records 4000 --seed 4 --corrupt 2:8:2000
    torchrun --nproc-per-node 4 --tee 3 $GEN/dist_train.py --data $d/data --steps 6000 --timeout 180 \
        --eval-every 500 --ckpt-every 1000 --debug-grads > $OUT/case04/train.log 2>&1
    echo "exit $?" ;;
01)  # 4 ranks, one log file per rank (torchrun --log-dir -r 3): rank 1's 8th shard sits on a FIFO with no
     # writer (as a read from a wedged network mount): its DataLoader worker blocks in open(), its main
     # process waits on the worker, the peers time out in the next allreduce (gloo timeout 180 s)
    d=$WORK/c01; rm -rf $d; mkdir -p $d $OUT/case01 && cd $d
    python $GEN/make_shards.py --out $d/data --world 4 --shards-per-rank 10 --records 4000 --seed 1 --blocked 1:7
    torchrun --nproc-per-node 4 --log-dir $OUT/case01/logs -r 3 $GEN/dist_train.py --data $d/data --steps 6000 \
        --timeout 180 --eval-every 500 --ckpt-every 1000 --debug-grads > $OUT/case01/launcher.log 2>&1
    echo "exit $?" ;;
10)  # 4 ranks, plain torchrun console (no --tee): rank 3's loader skips one unparsable record (a WARNING),
     # so with drop_last it has one batch fewer in the epoch; at the epoch end rank 3 enters the eval
     # all_reduce while its peers are still in their last step's DDP allreduce: gloo collective mismatch
    d=$WORK/c10; rm -rf $d; mkdir -p $d $OUT/case10 && cd $d
    python $GEN/make_shards.py --out $d/data --world 4 --shards-per-rank 4 --records 6000 --seed 10 --corrupt 3:1:1500
    torchrun --nproc-per-node 4 $GEN/dist_epochs.py --data $d/data --epochs 3 --timeout 120 --debug-grads \
        > $OUT/case10/train.log 2>&1
    echo "exit $?" ;;
esac
