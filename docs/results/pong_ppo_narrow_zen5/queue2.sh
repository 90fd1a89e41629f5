#!/usr/bin/env bash
# After screen.sh: the 32-32-32 candidate's Pong seeds 2-3 (fp32 capped), Breakout 10M (bf16), Pong 3 seeds bf16.
set -u
while kill -0 31522 2>/dev/null; do sleep 5; done
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src
echo "$(date -u +%FT%TZ) start c32 fp32 seeds 1,2,3"
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench solve --algo ppo --env pong --seeds 1,2,3 --max-minutes 10 \
  --out-dir /work/suites/s44/c32_32_32 -- --precision fp32 --torso-channels 32 32 32
echo "$(date -u +%FT%TZ) end c32 fp32 rc=$?"
echo "$(date -u +%FT%TZ) start breakout c32 bf16"
rapidrl bench atari --games breakout --algos ppo:lean --seeds 1 --max-frames 10000000 \
  --out-dir /work/suites/s44/breakout_c32 -- --torso-channels 32 32 32
echo "$(date -u +%FT%TZ) end breakout c32 rc=$?"
echo "$(date -u +%FT%TZ) start c32 bf16 seeds 1,2,3"
rapidrl bench solve --algo ppo --env pong --seeds 1,2,3 --max-minutes 10 \
  --out-dir /work/suites/s44/c32_bf16 -- --torso-channels 32 32 32
echo "$(date -u +%FT%TZ) end c32 bf16 rc=$?"
