#!/usr/bin/env bash
# Issue 35's suite, PPO lean. Seed 1 ran this loop from a worktree at 739cb6e with its own venv
# (cd /work/suite-wt; . .venv/bin/activate; no PYTHONPATH); from 2026-11-26 20:56
# the worktree at d26caae (same learning bit for bit, faster: kept malloc heap, chunked
# normalization). One run at a time.
set -u
cd /work/fast-wt
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/fast-wt/src
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
