#!/usr/bin/env bash
# bench profile of lean on Pong, fp32 capped to AVX2: acting threads and env batch variants
cd /work/main && . .venv/bin/activate
d=.; lscpu | grep "Model name" > $d/log.txt
export ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
for r in 1 2; do
  for v in base act2 eb32; do
    case $v in base) flag="";; act2) flag="--act-threads 2";; eb32) flag="--env-batch-size 32";; esac
    s=$(date +%s.%N)
    timeout 300 rapidrl bench profile --algo ppo --warmup 1 --updates 3 --json $d/r$r-$v.json -- --preset lean --env pong --precision fp32 $flag > $d/r$r-$v.md 2>&1
    echo "round $r $v rc=$? wall $(echo "$(date +%s.%N) - $s" | bc) s" >> $d/log.txt
  done
done
echo done >> $d/log.txt
