#!/usr/bin/env bash
# Issue 36: lean with 3 epochs x 4 minibatches (25% fewer sample passes), Pong fp32 capped, seed 1. Worktree at 28efcac.
set -u
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start pong fp32 e3m4"
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench solve --algo ppo --env pong --seeds 1 --max-minutes 8 \
  --out-dir /work/suites/s45/e3m4_fp32 -- --precision fp32 --epochs 3
echo "$(date -u +%FT%TZ) end pong rc=$?"
