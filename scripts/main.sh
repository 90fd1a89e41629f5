#!/usr/bin/env bash
# Installs rapidrl and runs the main job on Pong (ale-py ships the ROM).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
rapidrl bench envs --env pong --num-envs 8 --seconds 3 --repeats 1 "$@"
