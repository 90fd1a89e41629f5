#!/usr/bin/env bash
# Installs rapidrl and runs the main job: a short real PPO training on Atari Pong (ale-py ships
# the ROM), about 3-4 minutes on 2 cores. Extra arguments go to `rapidrl train ppo`, e.g.
# `bash scripts/main.sh --max-frames 20000000` for a full run to a solved Pong.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
rapidrl train ppo --env pong --preset fast --max-frames 500000 "$@"
