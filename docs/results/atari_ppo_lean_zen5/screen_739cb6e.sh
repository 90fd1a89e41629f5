#!/usr/bin/env bash
# Issue 35's suite, PPO lean, from the worktree at a fixed commit (739cb6e). One run at a time.
set -u
cd /work/suite-wt
. .venv/bin/activate
run() { # out-dir game seed extra...
  local out=$1 game=$2 seed=$3; shift 3
  echo "$(date -u +%FT%TZ) start $out $game seed $seed $*"
  rapidrl bench atari --games "$game" --algos ppo:lean --seeds "$seed" --max-frames 10000000 \
    --out-dir "/work/suites/$out" -- "$@"
  echo "$(date -u +%FT%TZ) end $out $game seed $seed rc=$?"
}
for seed in 1 2 3; do
  for game in breakout qbert name_this_game phoenix battle_zone double_dunk; do
    run lean52x2 $game $seed
  done
done
run lean84x4 breakout 1 --obs-size 84 --frame-stack 4
