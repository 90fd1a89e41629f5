#!/usr/bin/env bash
# After q.sh (pid 28114): the suite's other four games with --epochs 3, 10M bf16 seed 1. Worktree at 28efcac.
set -u
while kill -0 28114 2>/dev/null; do sleep 5; done
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
for g in phoenix qbert battle_zone double_dunk; do
  echo "$(date -u +%FT%TZ) start $g e3m4"
  rapidrl bench atari --games $g --algos ppo:lean --seeds 1 --max-frames 10000000 \
    --out-dir /work/suites/s45/suite_e3m4 -- --epochs 3
  echo "$(date -u +%FT%TZ) end $g rc=$?"
done
