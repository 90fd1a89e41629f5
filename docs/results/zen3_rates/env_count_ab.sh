#!/usr/bin/env bash
# PQN fast at 52x52: 32 envs x 32 steps vs 64 envs x 16 steps (the same 1,024 agent steps and
# 8 minibatches of 128 per update), alternated twice, per-4,096-frame medians of metrics rows.
cd "$(dirname "$0")/../../.." && . .venv/bin/activate
for r in 1 2; do
  for arm in "32 32" "64 16"; do
    set -- $arm
    d=/tmp/ab/e$1-$r
    rm -rf $d
    python -m rapidrl train pqn --env pong --preset fast --obs-size 52 --num-envs $1 --num-steps $2 \
      --max-frames 250000 --no-tensorboard --no-progress --run-dir $d > $d.log 2>&1
    python3 - $d/metrics.csv "$1x$2" $r <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))[1:]
f = lambda k: st.median(float(r[k]) for r in rows)
print(f"envs x steps {sys.argv[2]} round {sys.argv[3]}: rollout {f('rollout_s'):.3f} s update {f('update_s'):.3f} s fps {f('fps'):.0f} (rows {len(rows)})", flush=True)
PY
  done
done
