#!/usr/bin/env bash
# PPO lean rollout layouts, bench profile, alone. Usage: layouts.sh OUTDIR
set -u
out=$1; mkdir -p "$out"; here=$(cd "$(dirname "$0")" && pwd); cd "$(git -C "$here" rev-parse --show-toplevel)"; . .venv/bin/activate
cap="env ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"
P="--algo ppo --warmup 1 --updates 3"
T="--preset lean --env pong --precision fp32"
run() { name=$1; shift; echo "== $name $(date -u +%T)"; "$@" > "$out/$name.md" 2>&1; tail -22 "$out/$name.md" | grep -E "frames an update|act|env|update/|busy"; }
run fp32-default $cap rapidrl bench profile $P --json $out/fp32-default.json -- $T
run fp32-async-inline $cap python "$here/async_inline.py" bench profile $P --json $out/fp32-async-inline.json -- $T --env-batch-size 32
run fp32-async-4w $cap rapidrl bench profile $P --json $out/fp32-async-4w.json -- $T --backend async --num-workers 4 --env-batch-size 32
run fp32-ale-async $cap rapidrl bench profile $P --json $out/fp32-ale-async.json -- $T --backend ale --num-workers 1 --env-batch-size 32
run fp32-ale-async-2t $cap rapidrl bench profile $P --json $out/fp32-ale-async-2t.json -- $T --backend ale --num-workers 2 --env-batch-size 32
run fp32-ale-sync $cap rapidrl bench profile $P --json $out/fp32-ale-sync.json -- $T --backend ale --num-workers 2
run fp32-envpool-async $cap rapidrl bench profile $P --json $out/fp32-envpool-async.json -- $T --backend envpool --num-workers 1 --env-batch-size 32
run fp32-default-2 $cap rapidrl bench profile $P --json $out/fp32-default-2.json -- $T
