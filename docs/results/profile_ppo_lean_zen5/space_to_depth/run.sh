#!/usr/bin/env bash
cd /work/main; . .venv/bin/activate
out=/work/probes/s2d
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python $out/s2d.py fp32 > $out/avx2_fp32.txt 2>&1
python $out/s2d.py bf16 > $out/bf16.txt 2>&1
python $out/s2d.py fp32 > $out/avx512_fp32.txt 2>&1
cap="env ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"
P="--algo ppo --warmup 1 --updates 3"
T="--preset lean --env pong"
prof() { # name tree extra...
  local name=$1 tree=$2; shift 2
  echo "== $name $(date -u +%T)" >> $out/profile.log
  env PYTHONPATH=$tree/src "$@" > $out/$name.md 2>&1
  grep -E "frames an update|update/(forward|backward)|rollout/act" $out/$name.md >> $out/profile.log
}
prof fp32-old-1 /work/fast-wt $cap rapidrl bench profile $P --json $out/fp32-old-1.json -- $T --precision fp32
prof fp32-new-1 /work/main $cap rapidrl bench profile $P --json $out/fp32-new-1.json -- $T --precision fp32
prof fp32-new-2 /work/main $cap rapidrl bench profile $P --json $out/fp32-new-2.json -- $T --precision fp32
prof fp32-old-2 /work/fast-wt $cap rapidrl bench profile $P --json $out/fp32-old-2.json -- $T --precision fp32
prof bf16-old-1 /work/fast-wt rapidrl bench profile $P --json $out/bf16-old-1.json -- $T
prof bf16-new-1 /work/main rapidrl bench profile $P --json $out/bf16-new-1.json -- $T
