#!/usr/bin/env bash
# The same-hour baseline: seed 1 eager, fp32 capped to AVX2, main checkout.
cd /work/main && . .venv/bin/activate
export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
timeout 600 rapidrl bench solve --algo ppo --env pong --seeds 1 --max-minutes 8 \
  --out-dir /work/probes/compile/solve/eager > /work/probes/compile/solve/eager_log.txt 2>&1
echo "rc=$?" >> /work/probes/compile/solve/eager_log.txt
