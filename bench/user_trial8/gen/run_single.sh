#!/bin/bash
# Regenerate the single-process cases. Usage: run_single.sh CASE (04 05 07 08), OUT=/tmp/trial8
set -u
GEN=${GEN:-$(cd "$(dirname "$0")" && pwd)}
OUT=${OUT:-/tmp/trial8}
WORK=${WORK:-/tmp/t8work}
case "$1" in
04)  # token ids 250-255 are reserved and masked out of the output distribution in a hand-written loss
     # (-log(softmax(masked logits)[target])); one training row (156800 of 224000, read in order) carries a
     # stray token 253: p = 0, loss inf, NaN gradients, NaN weights; the run goes on with loss nan to the end.
    d=$WORK/c04; rm -rf $d; mkdir -p $d $OUT/case04 && cd $d
    python $GEN/prepare_data.py --kind array --out $d/data/train.npy --rows 224000 --vocab 250 --seed 44 \
        --eval-out $d/data/valid.npy --token-at 156800:20:253
    python $GEN/train.py --train-file $d/data/train.npy --eval-file $d/data/valid.npy --epochs 1 --batch 16 \
        --reserved 6 --workers 2 --eval-every 1000 --ckpt-every 2000 --debug-grads --tqdm > $OUT/case04/train.log 2>&1
    echo "exit $?" ;;
05)  # the evaluation file is the training file (copy-paste in the config): a pair-embedding model memorizes
     # 2048 training rows over 60 epochs, 'eval_loss' follows the training loss down, the held-out test
     # split evaluated once at the end is far worse.
    d=$WORK/c05; rm -rf $d; mkdir -p $d $OUT/case05 && cd $d
    python $GEN/prepare_data.py --kind array --out $d/data/train.npy --rows 2048 --order2 --seed 55 \
        --eval-out $d/data/test.npy --eval-rows 2048
    python $GEN/train.py --train-file $d/data/train.npy --eval-file $d/data/train.npy --test-file $d/data/test.npy \
        --epochs 60 --batch 16 --shuffle --pair-buckets 16384 --lr 3e-3 --warmup 500 --workers 2 \
        --eval-every 500 --ckpt-every 2000 --debug-grads > $OUT/case05/train.log 2>&1
    echo "exit $?" ;;
07)  # healthy run stopped by `timeout` (SIGTERM) mid-run, then resumed from its newest checkpoint with the
     # same command plus --resume, appending to the same log; completes.
    d=$WORK/c07; rm -rf $d; mkdir -p $d $OUT/case07 && cd $d
    timeout 150 python $GEN/train.py --steps 16000 --batch 16 --shuffle --workers 2 --eval-every 1000 \
        --ckpt-every 2000 --debug-grads --tqdm > $OUT/case07/train.log 2>&1
    echo "exit $? (124 = stopped by timeout)"
    python $GEN/train.py --steps 16000 --batch 16 --shuffle --workers 2 --eval-every 1000 \
        --ckpt-every 2000 --debug-grads --tqdm --resume >> $OUT/case07/train.log 2>&1
    echo "exit $?" ;;
08)  # gradient accumulation over 64 micro-batches: each micro-batch's mean loss is backpropagated without
     # dividing by 64, so the accumulated gradient is 64x the mean; with plain SGD, no clipping (lr 0.045, warmup over
     # 1800 of 2000 steps) the effective lr reaches 2.9: the loss falls, then rises as the lr ramps up.
    d=$WORK/c08; rm -rf $d; mkdir -p $d $OUT/case08 && cd $d
    python $GEN/train.py --steps 2000 --batch 4 --accum 64 --optim sgd --lr 0.045 --clip 0 --schedule constant --warmup 1800 \
        --shuffle --workers 1 --eval-every 100 --ckpt-every 500 --debug-grads > $OUT/case08/train.log 2>&1
    echo "exit $?" ;;
esac
