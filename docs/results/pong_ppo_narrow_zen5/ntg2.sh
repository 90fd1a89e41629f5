#!/usr/bin/env bash
# Name This Game seed 2 with the 32-wide torso (worktree at 28efcac, the flag), bf16, 10M frames.
set -u
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start ntg seed 2 c32_32_32"
rapidrl bench atari --games name_this_game --algos ppo:lean --seeds 2 --max-frames 10000000 \
  --out-dir /work/suites/s44/ntg_c32_32_32_seed2 -- --torso-channels 32 32 32
echo "$(date -u +%FT%TZ) end rc=$?"
