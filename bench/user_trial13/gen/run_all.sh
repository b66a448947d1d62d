#!/usr/bin/env bash
# Build every case of trial 13 into /work/trial13 (or $T13_OUT). Each generator checks that its
# failure really happened as intended and exits non-zero otherwise; such a case is rebuilt (max 3 tries).
set -u
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
start=$(date +%s)
status=0
for c in case01 case02 case03 case04 case05 case06 case07 case08; do
  for try in 1 2 3; do
    t0=$(date +%s)
    if python "$c.py"; then
      echo "== $c ok in $(( $(date +%s) - t0 ))s (try $try)"
      break
    fi
    echo "== $c failed (try $try)"
    [ "$try" = 3 ] && status=1
  done
done
echo "== total build time $(( $(date +%s) - start ))s"
exit $status
