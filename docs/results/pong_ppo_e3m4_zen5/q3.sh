#!/usr/bin/env bash
# After q2.sh (pid 28665): the before/after profile (alone), then Breakout seed 2 with --epochs 3,
# 10M bf16 (seed 1 ended below lean's three seeds). Worktree at 28efcac for the Breakout run.
set -u
while kill -0 28665 2>/dev/null; do sleep 5; done
/work/suites/s45/profile.sh
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start breakout seed 2 e3m4"
rapidrl bench atari --games breakout --algos ppo:lean --seeds 2 --max-frames 10000000 \
  --out-dir /work/suites/s45/suite_e3m4 -- --epochs 3
echo "$(date -u +%FT%TZ) end rc=$?"
