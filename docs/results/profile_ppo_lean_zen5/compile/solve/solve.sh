#!/usr/bin/env bash
# Issue 36: Pong solves with --compile, fp32 capped to AVX2, seeds 1-3, main checkout (HEAD),
# a fresh inductor cache (seed 1 compiles cold, seeds 2-3 find it warm).
cd /work/main && . .venv/bin/activate
export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 TORCHINDUCTOR_CACHE_DIR=/tmp/ind_solve
rm -rf /tmp/ind_solve
git rev-parse --short HEAD > /work/probes/compile/solve/commit.txt
timeout 1500 rapidrl bench solve --algo ppo --env pong --seeds 1,2,3 --max-minutes 8 \
  --out-dir /work/probes/compile/solve/out -- --precision fp32 --compile > /work/probes/compile/solve/log.txt 2>&1
echo "rc=$?" >> /work/probes/compile/solve/log.txt
