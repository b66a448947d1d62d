#!/usr/bin/env bash
# launch with automatic restart: resumes from the newest checkpoint after a crash
cd "$(dirname "$0")"
for attempt in 1 2 3; do
  python train.py --resume auto >> train.log 2>&1 && exit 0
  rc=$?
  echo "[run.sh $(date '+%F %T')] train.py exited with code $rc (attempt $attempt), restarting" >> train.log
done
exit 1
