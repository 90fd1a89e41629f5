#!/usr/bin/env bash
set -u
out=$1; mkdir -p "$out"; here=$(cd "$(dirname "$0")" && pwd); cd "$(git -C "$here" rev-parse --show-toplevel)"; . .venv/bin/activate
cap="env ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"
P="--algo ppo --warmup 1 --updates 3"
T="--preset lean --env pong --precision fp32"
run() { name=$1; shift; echo "== $name $(date -u +%T)"; "$@" > "$out/$name.md" 2>&1; tail -22 "$out/$name.md" | grep -E "frames an update|act|env|update/|busy|Error"; }
for r in 1 2; do
run fp32-async-inline-$r $cap python "$here/async_inline.py" bench profile $P --json $out/fp32-async-inline-$r.json -- $T --env-batch-size 32
run fp32-default-$r $cap rapidrl bench profile $P --json $out/fp32-default-$r.json -- $T
done
