#!/usr/bin/env bash
# fp32 with the kernels capped to AVX2: lean's rate on each suite game (bench profile, 3 updates).
cd /work/main; . .venv/bin/activate
out=/work/probes/games
for g in breakout qbert name_this_game phoenix battle_zone double_dunk; do
  echo "== $g $(date -u +%T)" >> $out/profile.log
  ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 rapidrl bench profile --algo ppo --warmup 1 \
    --updates 3 --json $out/$g.json -- --preset lean --env $g --precision fp32 > $out/$g.md 2>&1
  grep -E "frames an update" $out/$g.md >> $out/profile.log
done
