#!/usr/bin/env bash
# budgeted run: the job gets 40 seconds of wall time
cd "$(dirname "$0")"
timeout 40s python train.py --config config.yaml >> train.log 2>&1
