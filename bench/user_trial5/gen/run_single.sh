#!/bin/bash
# Regenerate the single-process cases. Usage: run_single.sh CASE (02 03 05 06 07 08 09), OUT=/tmp/trial5
set -u
GEN=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/trial5}
WORK=${WORK:-/tmp/t5work}
case "$1" in
02)  # healthy: retried download, DataLoader worker-count warning, a 300-step noisy data window, completes
    d=$WORK/c02; rm -rf $d; mkdir -p $d $OUT/case02 && cd $d
    python $GEN/train.py --steps 24000 --workers 4 --spike-at 9000 --fetch-url http://127.0.0.1:9/tinylm/tokenizer.json \
        --eval-every 2000 --ckpt-every 4000 --debug-grads --tqdm > $OUT/case02/train.log 2>&1
    echo "exit $?" ;;
03)  # checkpoints kept (no rotation) on a 12 MB mount: a save fails with ENOSPC deep into the run
    d=$WORK/c03; rm -rf $d; mkdir -p $d/checkpoints $OUT/case03 && cd $d
    mount -t tmpfs -o size=12m tmpfs $d/checkpoints
    python $GEN/train.py --steps 40000 --workers 2 --eval-every 2000 --ckpt-every 1000 --ckpt-dir checkpoints \
        --debug-grads > $OUT/case03/train.log 2>&1
    echo "exit $?"; umount $d/checkpoints ;;
06)  # MultiStepLR with gamma=10 (meant 0.1): SGD lr 0.3 -> 3.0 at step 14000, loss inf then nan to the end
    d=$WORK/c06; rm -rf $d; mkdir -p $d $OUT/case06 && cd $d
    python $GEN/train.py --steps 22000 --optim sgd --lr 0.3 --milestones 14000,20000 --gamma 10 --clip 1e9 \
        --workers 2 --eval-every 2000 --ckpt-every 5000 --debug-grads --tqdm > $OUT/case06/train.log 2>&1
    echo "exit $?" ;;
07)  # checkpoint upload thread holds the dataset cache lock when the next epoch forks DataLoader workers:
     # the worker blocks forever on the copied lock, the main process waits forever. timeout ends it.
    d=$WORK/c07; rm -rf $d; mkdir -p $d $OUT/case07 && cd $d
    timeout 600 python $GEN/train.py --steps 40000 --train-size 40000 --workers 2 --eval-every 1000 --ckpt-every 3000 \
        --upload-thread --debug-grads > $OUT/case07/train.log 2>&1
    echo "exit $? (124 = killed by timeout)"; date -u ;;
08)  # eval outside no_grad keeping every eval's logits: address-space limit 3.5 GB -> allocation failure
    d=$WORK/c08; rm -rf $d; mkdir -p $d $OUT/case08 && cd $d
    prlimit --as=3500000000 python $GEN/train.py --steps 30000 --workers 2 --eval-every 1000 --ckpt-every 5000 \
        --keep-eval-outputs --debug-grads > $OUT/case08/train.log 2>&1
    echo "exit $?" ;;
09)  # a CPU-time limit (ulimit -t 200 soft) on a run whose DataLoader worker does CPU-heavy per-sample
     # augmentation in a persistent worker: the worker's own CPU time reaches the limit first, the kernel
     # sends it SIGXCPU, the main process reports the dead worker
    d=$WORK/c09; rm -rf $d; mkdir -p $d $OUT/case09 && cd $d
    prlimit --cpu=200:unlimited python $GEN/train.py --steps 30000 --workers 1 --persistent-workers \
        --augment-cost 20000 --eval-every 1000 --ckpt-every 5000 --debug-grads > $OUT/case09/train.log 2>&1
    echo "exit $?" ;;
05)  # a 128-sample training shard (max_train_samples left from debugging), 2000 epochs: train loss falls,
     # validation loss climbs; MLflow file store in the run directory, console prints the train loss only
    d=$OUT/case05/run; rm -rf $OUT/case05; mkdir -p $d && cd $d
    MLFLOW_ALLOW_FILE_STORE=true python $GEN/overfit.py --run-dir $d --epochs 2000 > $d/train.log 2>&1
    echo "exit $?" ;;
esac
