#!/usr/bin/env bash
# The GPU check: every trainer briefly on --device cuda (plus resume and eval), then Pong time to
# solve with PQN and PPO through `rapidrl bench solve`. Written for a lent GPU machine whose
# python3 already holds a CUDA torch; the other dependencies come as wheels in .whl/ (see
# docs/results/gpu_h200/README.md). Usage: bash scripts/gpu_check.sh OUT_DIR [DEVICE] [PQN_MIN] [PPO_MIN]
# The PPO solve runs the preset PPO_PRESET (default lean: input and value normalization and
# the KL-adaptive rate, never yet run on CUDA); PQN_ARGS / PPO_ARGS add trainer arguments.
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
step pqn 90 $py -m rapidrl train pqn "${common[@]}" --max-frames "$smoke_frames" --run-dir "$R/pqn"
step pqn_resume 90 $py -m rapidrl train pqn --resume "$R/pqn" --device "$device" --max-frames $((smoke_frames * 2))
step pqn_eval 90 $py -m rapidrl eval "$R/pqn" --episodes 2 --device "$device" --max-steps 3000
step ppo 90 $py -m rapidrl train ppo "${common[@]}" --max-frames "$smoke_frames" --run-dir "$R/ppo"
step ppo_lean 90 $py -m rapidrl train ppo "${common[@]}" --preset lean --max-frames "$smoke_frames" --run-dir "$R/ppo_lean"
step ppo_lstm 90 $py -m rapidrl train ppo-lstm "${common[@]}" --max-frames "$smoke_frames" --run-dir "$R/ppo_lstm"
step dqn 90 $py -m rapidrl train dqn "${common[@]}" --max-frames "$smoke_frames" --learning-starts 1000 --run-dir "$R/dqn"
step rainbow 90 $py -m rapidrl train rainbow "${common[@]}" --max-frames "$smoke_frames" --learning-starts 1000 --run-dir "$R/rainbow"
# Time to solve: one seed each (the lease's minutes), PQN first (its <= 5 min target).
step solve_pqn $(python3 -c "print(int($pqn_min * 60 + 150))") $py -m rapidrl bench solve --algo pqn --preset fast --seeds 1 --max-minutes "$pqn_min" --out-dir "$R/solve_pqn" -- --device "$device" ${PQN_ARGS:-}
step solve_ppo $(python3 -c "print(int($ppo_min * 60 + 150))") $py -m rapidrl bench solve --algo ppo --preset "${PPO_PRESET:-lean}" --seeds 1 --max-minutes "$ppo_min" --out-dir "$R/solve_ppo" -- --device "$device" ${PPO_ARGS:-}
printf '%s\n' "${status[@]}" | tee "$out/status.txt"
for d in solve_pqn solve_ppo; do [ -f "$R/$d/solve.md" ] && { echo "== $d"; cat "$R/$d/solve.md"; }; done
tar --exclude='checkpoints' --exclude='tb' --exclude='*.pt' -czf "$out/runs.tgz" -C "$R" . && ls -la "$out"
