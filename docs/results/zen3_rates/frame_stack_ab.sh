#!/usr/bin/env bash
# PQN fast at 52x52: frame stack 4 vs 2, alternated twice, per-4,096-frame medians
cd /work/main && . .venv/bin/activate
# (run with the checkout of the commit that added --frame-stack)
for r in 1 2; do
  for fs in 4 2; do
    rm -rf /tmp/ab/fs$fs-$r
    python -m rapidrl train pqn --env pong --preset fast --obs-size 52 --frame-stack $fs --max-frames 200000 --no-tensorboard --no-progress \
      --run-dir /tmp/ab/fs$fs-$r > /tmp/ab/fs$fs-$r.log 2>&1
    python3 - /tmp/ab/fs$fs-$r/metrics.csv $fs $r <<'PY'
import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))[1:]
f = lambda k: st.median(float(r[k]) for r in rows)
print(f"frame_stack {sys.argv[2]} round {sys.argv[3]}: rollout {f('rollout_s'):.3f} s update {f('update_s'):.3f} s fps {f('fps'):.0f} (rows {len(rows)})", flush=True)
PY
  done
done
