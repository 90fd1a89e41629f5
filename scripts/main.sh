#!/usr/bin/env bash
# Installs rapidrl and runs the main job: a real 20-minute PQN training on Atari Pong (ale-py
# ships the ROM) that shows the learning curve leave the floor on a 2-core CPU. The `lean`
# preset (52x52 frames, two of them) is the one measured on a 2-core CPU without bf16 (AMD
# Zen 3, AVX2 only): mean-100 -13.2 / -18.0 / -14.1 at 10 minutes and +6.9 / -14.8 / +0.7 at
# 20 (seeds 1-3), Pong solved in 34.7-36.4 minutes (README). Extra arguments go to `rapidrl
# train pqn`, e.g. `bash scripts/main.sh --max-minutes 40` for a run to a solved Pong
# (`--stop-at-score auto` stops it at mean-100 > 18).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
rapidrl train pqn --env pong --preset lean --max-minutes 20 "$@"
