#!/usr/bin/env bash
# After the sweep: issue 37's speed check (before the redesign, 1a96458, against now), alternated,
# alone; then the bf16 backward probe (issue 36). The suite resumes by hand after the tests.
set -u
while kill -0 516 2>/dev/null; do sleep 10; done
echo "$(date -u +%FT%TZ) sweep over"
py=/work/suite-wt/.venv/bin/python
O=/work/suites/speedcheck
one() { # version round
  local v=$1 r=$2 src=/work/old-wt/src
  [ "$v" = new ] && src=/work/new-wt/src
  echo "$(date -u +%FT%TZ) $v round $r"
  PYTHONPATH=$src $py -m rapidrl.cli bench envs --env pong --num-envs 8 --seconds 4 --repeats 2 \
    --backends hybrid --json $O/$v-envs-$r.json > $O/$v-envs-$r.log 2>&1
  PYTHONPATH=$src $py -m rapidrl.cli bench dqn --seconds 15 --rungs baseline,inprocess \
    --json $O/$v-dqn-$r.json > $O/$v-dqn-$r.log 2>&1
  PYTHONPATH=$src $py -m rapidrl.cli train ppo --preset lean --env pong --max-frames 327680 \
    --seed 1 --no-progress --no-tensorboard --run-dir $O/$v-ppo-$r > $O/$v-ppo-$r.log 2>&1
}
one old 1; one new 1; one new 2; one old 2
echo "$(date -u +%FT%TZ) probe"
cd /work/new-wt
for p in "bf16 1" "bf16 0" "fp32 1"; do
  PYTHONPATH=/work/new-wt/src $py /work/suites/bf16bw/probe.py $p 16 > "/work/suites/bf16bw/probe_${p// /_}.txt" 2>&1
done
echo "$(date -u +%FT%TZ) after_sweep done"
