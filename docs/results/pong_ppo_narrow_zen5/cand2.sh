#!/usr/bin/env bash
# Issue 36: the 32-32-64 torso on Name This Game (10M, bf16, seed 1), then Pong fp32 capped seed 1. Worktree at 28efcac.
set -u
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start ntg c32_32_64"
rapidrl bench atari --games name_this_game --algos ppo:lean --seeds 1 --max-frames 10000000 \
  --out-dir /work/suites/s44/ntg_c32_32_64 -- --torso-channels 32 32 64
echo "$(date -u +%FT%TZ) end ntg rc=$?"
echo "$(date -u +%FT%TZ) start pong fp32 c32_32_64"
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench solve --algo ppo --env pong --seeds 1 --max-minutes 10 \
  --out-dir /work/suites/s44/c32_32_64 -- --precision fp32 --torso-channels 32 32 64
echo "$(date -u +%FT%TZ) end pong rc=$?"
