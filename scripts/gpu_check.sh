#!/usr/bin/env bash
# The GPU check: every trainer briefly on --device cuda (plus resume and eval), then Pong time to
# solve with PQN and PPO through `rapidrl bench solve`. Written for a lent GPU machine whose
# python3 already holds a CUDA torch; the other dependencies come as wheels in .whl/ (see
# docs/results/gpu_h200/README.md). Usage: bash scripts/gpu_check.sh OUT_DIR [DEVICE] [PQN_MIN] [PPO_MIN]
# The PPO solve runs the preset PPO_PRESET (default lean: input and value normalization and
# the KL-adaptive rate, never yet run on CUDA); PQN_ARGS / PPO_ARGS add trainer arguments.
# SMOKE="pqn ppo ..." picks the smoke steps (default all; "none" for none); SOLVES="dqn:lean:5
# ppo:lean:2" replaces the two solves with `bench solve --algo A --preset P --max-minutes M` each
# (the open issues' GPU targets; a fourth field adds trainer flags, commas for spaces:
# "dqn:lean:5:--num-envs,64"); EXTRA="CMD" runs one more command last (its rc is recorded).
set -u
out="${1:?usage: gpu_check.sh OUT_DIR [DEVICE] [PQN_MIN] [PPO_MIN]}"
device="${2:-cuda}"
pqn_min="${3:-4.5}"
ppo_min="${4:-2.0}"
smoke_frames="${SMOKE_FRAMES:-40000}"
export PYTHONUNBUFFERED=1
mkdir -p "$out"
py="${PYTHON:-python3}"
R=/tmp/gpu_runs
rm -rf "$R"; mkdir -p "$R"
log() { echo "[$(date +%T)] $*"; }
status=()
step() {  # step NAME TIMEOUT_S CMD...: run, record rc and seconds
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  log "start $name: $*"
  timeout -k 10 "$limit" "$@" > "$R/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$R/$name.log"
  status+=("$name rc=$rc $((SECONDS - t0))s")
  log "end $name rc=$rc"
}
log "host: $(nproc) cpus; $(nvidia-smi -L 2>/dev/null | head -1)"
$py -c "import torch, ale_py, gymnasium, tyro; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', 'ale_py', ale_py.__version__)"
common=(--env pong --device "$device" --no-tensorboard --log-every-seconds 2 --no-progress)
smoke="${SMOKE:-pqn pqn_resume pqn_eval ppo ppo_lean ppo_lstm dqn rainbow}"
want() { [[ " $smoke " == *" $1 "* ]]; }
want pqn && step pqn 90 $py -m rapidrl train pqn "${common[@]}" --max-frames "$smoke_frames" --run-dir "$R/pqn"
want pqn_resume && step pqn_resume 90 $py -m rapidrl train pqn --resume "$R/pqn" --device "$device" --max-frames $((smoke_frames * 2))
want pqn_eval && step pqn_eval 90 $py -m rapidrl eval "$R/pqn" --episodes 2 --device "$device" --max-steps 3000
want ppo && step ppo 90 $py -m rapidrl train ppo "${common[@]}" --preset ppo --max-frames "$smoke_frames" --run-dir "$R/ppo"
want ppo_lean && step ppo_lean 90 $py -m rapidrl train ppo "${common[@]}" --preset lean --max-frames "$smoke_frames" --run-dir "$R/ppo_lean"
want ppo_lstm && step ppo_lstm 90 $py -m rapidrl train ppo-lstm "${common[@]}" --max-frames "$smoke_frames" --run-dir "$R/ppo_lstm"
want dqn && step dqn 90 $py -m rapidrl train dqn "${common[@]}" --max-frames "$smoke_frames" --learning-starts 1000 --run-dir "$R/dqn"
want rainbow && step rainbow 90 $py -m rapidrl train rainbow "${common[@]}" --max-frames "$smoke_frames" --learning-starts 1000 --run-dir "$R/rainbow"
# Time to solve: one seed each (the lease's minutes).
solves="${SOLVES:-pqn:fast:$pqn_min ppo:${PPO_PRESET:-lean}:$ppo_min}"
for spec in $solves; do
  IFS=: read -r algo preset minutes extra <<< "$spec"
  args=""; [ "$algo" = pqn ] && args="${PQN_ARGS:-}"; [ "$algo" = ppo ] && args="${PPO_ARGS:-}"
  args="$args ${extra//,/ }"; name="solve_${algo}_$preset${extra:+_$(echo "$extra" | tr -c 'A-Za-z0-9\n' _ | cut -c1-40)}"
  step "$name" $(python3 -c "print(int($minutes * 60 + 150))") $py -m rapidrl bench solve --algo "$algo" --preset "$preset" --seeds 1 --max-minutes "$minutes" --out-dir "$R/$name" -- --device "$device" $args
done
[ -n "${EXTRA:-}" ] && step extra 600 bash -c "$EXTRA"
printf '%s\n' "${status[@]}" | tee "$out/status.txt"
for f in "$R"/solve_*/solve.md; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
tar --exclude='checkpoints' --exclude='tb' --exclude='*.pt' -czf "$out/runs.tgz" -C "$R" . && ls -la "$out"
