#!/usr/bin/env bash
# Issue 35's 1-seed screen, from the worktree at a fixed commit (739cb6e). One run at a time.
set -u
cd /work/suite-wt
. .venv/bin/activate
run() { # out-dir game extra...
  local out=$1 game=$2; shift 2
  echo "$(date -u +%FT%TZ) start $out $game $*"
  rapidrl bench atari --games "$game" --algos ppo:lean --seeds 1 --max-frames 10000000 \
    --out-dir "/work/suites/$out" -- "$@"
  echo "$(date -u +%FT%TZ) end $out $game rc=$?"
}
run lean52x2 breakout
run lean52x2 qbert
run lean52x2 name_this_game
run lean52x2 phoenix
run lean84x4 breakout --obs-size 84 --frame-stack 4
