#!/usr/bin/env bash
# Issue 36's candidate (lean with 3 epochs x 8 minibatches) on Breakout, 10M frames, seed 1,
# from the suite worktree (739cb6e); compared with lean's seed-1 curve in lean52x2.
set -u
cd /work/suite-wt
. .venv/bin/activate
echo "$(date -u +%FT%TZ) start lean_e3m8 breakout seed 1"
rapidrl bench atari --games breakout --algos ppo:lean --seeds 1 --max-frames 10000000 \
  --out-dir /work/suites/lean_e3m8 -- --epochs 3 --minibatches 8
echo "$(date -u +%FT%TZ) end lean_e3m8 breakout seed 1 rc=$?"
