#!/usr/bin/env bash
# Issue 36: where a cycle goes, lean with 4 epochs (before) and 3 (after), fp32 capped to AVX2 and bf16,
# interleaved, two rounds. Alone on the machine.
set -u
cd /work/main
. .venv/bin/activate
OUT=/work/suites/s45/profile
for r in 1 2; do
  for e in 4 3; do
    echo "$(date -u +%FT%TZ) avx2_fp32 epochs $e round $r"
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench profile --algo ppo --warmup 1 --updates 3 \
      --json $OUT/avx2_fp32-e$e-r$r.json -- --preset lean --env pong --precision fp32 --epochs $e > $OUT/avx2_fp32-e$e-r$r.md 2>&1
    echo "$(date -u +%FT%TZ) bf16 epochs $e round $r"
    rapidrl bench profile --algo ppo --warmup 1 --updates 3 \
      --json $OUT/bf16-e$e-r$r.json -- --preset lean --env pong --epochs $e > $OUT/bf16-e$e-r$r.md 2>&1
  done
done
echo "$(date -u +%FT%TZ) done"
