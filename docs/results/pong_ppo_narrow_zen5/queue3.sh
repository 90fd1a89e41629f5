#!/usr/bin/env bash
# After queue2 (pid given): profile before/after, the test suite, then the new lean's seed 1 on the
# other five suite games. Worktree /work/wt44b at the preset commit; tests in /work/main.
set -u
while kill -0 "$1" 2>/dev/null; do sleep 5; done
. /work/main/.venv/bin/activate
P=/work/main/docs/results/pong_ppo_narrow_zen5/profile
mkdir -p $P; lscpu | grep "Model name" > $P/log.txt
cd /work/wt44b; export PYTHONPATH=/work/wt44b/src
for r in 1 2; do
  for v in nature narrow; do
    flag=""; [ $v = nature ] && flag="--torso-channels 32 64 64"
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 timeout 300 rapidrl bench profile --algo ppo --warmup 1 --updates 3 \
      --json $P/avx2_fp32-$v-r$r.json -- --preset lean --env pong --precision fp32 $flag > $P/avx2_fp32-$v-r$r.md 2>&1
    echo "$(date -u +%FT%TZ) round $r fp32 $v rc=$?" >> $P/log.txt
    timeout 300 rapidrl bench profile --algo ppo --warmup 1 --updates 3 \
      --json $P/bf16-$v-r$r.json -- --preset lean --env pong $flag > $P/bf16-$v-r$r.md 2>&1
    echo "$(date -u +%FT%TZ) round $r bf16 $v rc=$?" >> $P/log.txt
  done
done
unset PYTHONPATH
echo "$(date -u +%FT%TZ) tests start" >> /work/suites/s44/tests.log
(cd /work/main && git log --oneline -1 && timeout 1500 bash scripts/test.sh) >> /work/suites/s44/tests.log 2>&1
echo "$(date -u +%FT%TZ) tests end rc=$?" >> /work/suites/s44/tests.log
cd /work/wt44b; export PYTHONPATH=/work/wt44b/src
for game in qbert name_this_game phoenix battle_zone double_dunk; do
  echo "$(date -u +%FT%TZ) start $game"
  rapidrl bench atari --games $game --algos ppo:lean --seeds 1 --max-frames 10000000 --out-dir /work/suites/s44/suite_narrow
  echo "$(date -u +%FT%TZ) end $game rc=$?"
done
