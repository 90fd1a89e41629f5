#!/bin/bash
cd /work/main
for rep in 1 2; do
for cl in --no-channels-last --channels-last; do
  d=/tmp/ab/$rep$cl; rm -rf $d
  .venv/bin/rapidrl train pqn --env pong --preset fast --max-frames 200000 --run-dir $d --no-progress $cl > $d.log 2>&1
  python3 - $d <<'P'
import csv,sys,statistics
rows=list(csv.DictReader(open(sys.argv[1]+'/metrics.csv')))[1:]
f=lambda k: statistics.median(float(r[k]) for r in rows)
print(sys.argv[1], 'fps', round(f('fps')), 'rollout_s', round(f('rollout_s'),3), 'update_s', round(f('update_s'),3))
P
done; done
