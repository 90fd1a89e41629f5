#!/usr/bin/env bash
# Issue 35: PPO lean without bf16 for a whole 10M-frame run: fp32, kernels capped to AVX2
# (what an AVX2-only CPU runs), Breakout seed 1, from the worktree at d26caae. Resumes.
set -u
cd /work/fast-wt
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/fast-wt/src ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
echo "$(date -u +%FT%TZ) start fp32avx2 breakout seed 1"
rapidrl bench atari --games breakout --algos ppo:lean --seeds 1 --max-frames 10000000 \
  --out-dir /work/suites/lean_fp32_avx2 -- --precision fp32
echo "$(date -u +%FT%TZ) end fp32avx2 breakout seed 1 rc=$?"
