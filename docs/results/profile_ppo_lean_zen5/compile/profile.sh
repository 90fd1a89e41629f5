#!/usr/bin/env bash
# bench profile of lean on Pong, fp32 capped to AVX2, without and with --compile, two rounds
# interleaved, at the main checkout (f257dee + --compile, uncommitted). Inductor cache: a fresh
# directory first (cold), then warm.
cd /work/main && . .venv/bin/activate
d=OUT; lscpu | grep "Model name" > $d/log.txt
export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 TORCHINDUCTOR_CACHE_DIR=/tmp/ind_profile
rm -rf /tmp/ind_profile
for r in 1 2; do
  for c in eager compile; do
    flag=""; [ $c = compile ] && flag="--compile"
    s=$(date +%s.%N)
    timeout 300 rapidrl bench profile --algo ppo --warmup 1 --updates 3 --json $d/r$r-$c.json -- --preset lean --env pong --precision fp32 $flag > $d/r$r-$c.md 2>&1
    echo "round $r $c rc=$? wall $(echo "$(date +%s.%N) - $s" | bc) s" >> $d/log.txt
  done
done
