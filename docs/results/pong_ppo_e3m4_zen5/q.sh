#!/usr/bin/env bash
# Issue 36: lean with --epochs 3 (3 x 4 minibatches): Pong fp32 capped seeds 2-3, Pong bf16 seeds 1-3,
# then Breakout and Name This Game 10M bf16 seed 1. Worktree at 28efcac.
set -u
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start pong fp32 e3m4 seeds 1-3"
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench solve --algo ppo --env pong --seeds 1,2,3 --max-minutes 8 \
  --out-dir /work/suites/s45/e3m4_fp32 -- --precision fp32 --epochs 3
echo "$(date -u +%FT%TZ) end rc=$?"
echo "$(date -u +%FT%TZ) start pong bf16 e3m4 seeds 1-3"
rapidrl bench solve --algo ppo --env pong --seeds 1,2,3 --max-minutes 8 \
  --out-dir /work/suites/s45/e3m4_bf16 -- --epochs 3
echo "$(date -u +%FT%TZ) end rc=$?"
for g in breakout name_this_game; do
  echo "$(date -u +%FT%TZ) start $g e3m4"
  rapidrl bench atari --games $g --algos ppo:lean --seeds 1 --max-frames 10000000 \
    --out-dir /work/suites/s45/suite_e3m4 -- --epochs 3
  echo "$(date -u +%FT%TZ) end $g rc=$?"
done
