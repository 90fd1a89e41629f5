#!/usr/bin/env bash
# Issue 35: PQN lean against fast, Breakout and Q*bert, 10M frames, seed 1, one run at a time,
# from the worktree at d26caae (PQN's code there is main's). Resumes like screen.sh.
set -u
cd /work/fast-wt
. /work/main/.venv/bin/activate
export PYTHONPATH=/work/fast-wt/src
for game in breakout qbert; do
  for preset in lean fast; do
    echo "$(date -u +%FT%TZ) start pqn $game $preset"
    rapidrl bench atari --games "$game" --algos "pqn:$preset" --seeds 1 --max-frames 10000000 \
      --out-dir /work/suites/pqn
    echo "$(date -u +%FT%TZ) end pqn $game $preset rc=$?"
  done
done
