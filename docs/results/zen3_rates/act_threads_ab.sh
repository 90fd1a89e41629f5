#!/usr/bin/env bash
# PQN fast at 52x52: 32 envs x 32 steps or 64 envs x 16 steps, acting on 1 or 2 torch threads,
# alternated twice, per-4,096-frame medians of metrics rows (the first row dropped).
cd "$(dirname "$0")/../../.." && . .venv/bin/activate
for r in 1 2; do
  for arm in "32 32 1" "32 32 2" "64 16 1" "64 16 2"; do
    set -- $arm
    d=/tmp/ab/a$1-$3-$r
    rm -rf $d
    python -m rapidrl train pqn --env pong --preset fast --obs-size 52 --num-envs $1 --num-steps $2 \
      --act-threads $3 --max-frames 200000 --no-tensorboard --no-progress --run-dir $d > $d.log 2>&1
    python3 - $d/metrics.csv "$1x$2 act_threads $3" $r <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))[1:]
f = lambda k: st.median(float(r[k]) for r in rows)
print(f"{sys.argv[2]} round {sys.argv[3]}: rollout {f('rollout_s'):.3f} s update {f('update_s'):.3f} s fps {f('fps'):.0f} (rows {len(rows)})", flush=True)
PY
  done
done
