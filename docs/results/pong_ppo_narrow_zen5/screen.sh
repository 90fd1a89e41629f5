#!/usr/bin/env bash
# Issue 36: cheaper torsos on Pong, fp32 capped to AVX2, seed 1 each (worktree at 28efcac).
set -u
cd /work/wt44
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/wt44/src ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
run() { # name extra...
  local name=$1; shift
  echo "$(date -u +%FT%TZ) start $name $*"
  rapidrl bench solve --algo ppo --env pong --seeds 1 --max-minutes 10 \
    --out-dir /work/suites/s44/$name -- --precision fp32 "$@"
  echo "$(date -u +%FT%TZ) end $name rc=$?"
}
run c32_32_32 --torso-channels 32 32 32
run c16_32_32_d256 --torso-channels 16 32 32 --torso-dim 256
