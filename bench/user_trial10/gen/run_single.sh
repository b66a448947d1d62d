#!/bin/bash
# Regenerate the single-process cases. Usage: run_single.sh CASE (02 03 04 05), OUT=/tmp/trial10
set -u
GEN=${GEN:-$(cd "$(dirname "$0")" && pwd)}
# common.py, prepare_data.py and metrics_server.py are trial 8's, unchanged: shared, not copied
T8=$(cd "$GEN/../../user_trial8/gen" && pwd)
export PYTHONPATH="$T8${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/trial10}
WORK=${WORK:-/tmp/t10work}
case "$1" in
02)  # the job's file-size limit (ulimit -f 8192 = 8 MiB) is below the size of a checkpoint (~10 MB: a 16384-bucket
     # pair embedding plus AdamW state); checkpoints are written by a background thread: every save stops at 8 MiB
     # ('basic_ios::clear: iostream error' then 'unexpected pos'), printed as 'Exception in thread ckpt-writer-N' while
     # training goes on; at the end load_best_model_at_end reads the truncated best checkpoint and crashes.
    d=$WORK/c02; rm -rf $d; mkdir -p $d $OUT/case02 && cd $d
    ( ulimit -f 8192
      python $GEN/train.py --steps 8000 --batch 16 --shuffle --pair-buckets 16384 --lr 3e-3 --warmup 500 \
          --workers 2 --eval-every 500 --ckpt-every 2000 --async-ckpt --load-best --tqdm ) > $OUT/case02/train.log 2>&1
    echo "exit $?" ;;
03)  # first attempt (d_model 48) stopped by the job time limit (`timeout 45`, SIGTERM); the resubmission adds
     # --resume but also --d-model 64: the checkpoint's shapes do not match, the trainer logs one WARNING
     # ('could not restore the training state ... size mismatch ...; training from scratch') and trains the whole
     # run again from step 0, appending to the same log; completes.
    d=$WORK/c03; rm -rf $d; mkdir -p $d $OUT/case03 && cd $d
    timeout 45 python $GEN/train.py --steps 6000 --batch 16 --shuffle --workers 2 --eval-every 500 \
        --ckpt-every 500 --debug-grads > $OUT/case03/train.log 2>&1
    echo "exit $? (124 = stopped by timeout)"
    python $GEN/train.py --steps 6000 --batch 16 --shuffle --workers 2 --eval-every 500 \
        --ckpt-every 500 --debug-grads --d-model 64 --resume >> $OUT/case03/train.log 2>&1
    echo "exit $?" ;;
04)  # linear lr decay whose num_training_steps is one epoch's steps (500) while the run is 20 epochs (10000
     # steps): the lr reaches 0 at step 500 (5%), the loss stays where it was (far from converged: ~3.5 where the
     # chain allows ~2.2) for the remaining 9500 steps; completes.
    d=$WORK/c04; rm -rf $d; mkdir -p $d $OUT/case04 && cd $d
    python $T8/prepare_data.py --kind array --out $d/data/train.npy --rows 8000 --seed 44 \
        --eval-out $d/data/valid.npy --eval-rows 2048
    python $GEN/train.py --train-file $d/data/train.npy --eval-file $d/data/valid.npy --epochs 20 --batch 16 \
        --shuffle --schedule linear --warmup 100 --lr 5e-4 --workers 2 --eval-every 500 --ckpt-every 2500 \
        > $OUT/case04/train.log 2>&1
    echo "exit $?" ;;
05)  # 12 streamed shards of 8000 rows (500 batches), 2 loader workers (worker 1 reads shards 1, 3, 5, 7, ...);
     # train-00007-of-00012.npy is a named pipe (a streaming download that never started): worker 1 blocks in
     # open() after ~3000 steps, the main process waits for its batch forever; `timeout 240` ends it with SIGTERM.
    d=$WORK/c05; rm -rf $d; mkdir -p $d $OUT/case05 && cd $d
    python $T8/prepare_data.py --kind shards --out $d/data --shards 12 --rows 8000 --seed 55
    rm $d/data/train-00007-of-00012.npy; mkfifo $d/data/train-00007-of-00012.npy
    timeout 240 python $GEN/train.py --shard-dir $d/data --shard-rows 8000 --epochs 1 --batch 16 --workers 2 \
        --eval-every 500 --ckpt-every 1000 --debug-grads > $OUT/case05/train.log 2>&1
    echo "exit $?" ;;
esac
