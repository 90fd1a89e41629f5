#!/usr/bin/env bash
cd /work/main; . .venv/bin/activate
out=/work/probes/s2d/round2; mkdir -p $out
cap="env ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"
P="--algo ppo --warmup 1 --updates 3"
T="--preset lean --env pong"
prof() { # name tree extra...
  local name=$1 tree=$2; shift 2
  echo "== $name $(date -u +%T)" >> $out/profile.log
  env PYTHONPATH=$tree/src "$@" > $out/$name.md 2>&1
  grep -E "frames an update|update/(forward|backward)|rollout/act" $out/$name.md >> $out/profile.log
}
for r in 1 2; do
prof bf16-old-$r /work/fast-wt rapidrl bench profile $P --json $out/bf16-old-$r.json -- $T
prof bf16-new-$r /work/main rapidrl bench profile $P --json $out/bf16-new-$r.json -- $T
done
prof fp32-new-1 /work/main $cap rapidrl bench profile $P --json $out/fp32-new-1.json -- $T --precision fp32
prof fp32-old-1 /work/fast-wt $cap rapidrl bench profile $P --json $out/fp32-old-1.json -- $T --precision fp32
