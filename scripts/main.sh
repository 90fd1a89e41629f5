#!/usr/bin/env bash
# Installs rapidrl and runs the main job: a real 20-minute PQN training on Atari Pong (ale-py
# ships the ROM) that shows the learning curve leave the floor on a 2-core CPU. Extra arguments
# go to `rapidrl train pqn`, e.g. `bash scripts/main.sh --max-minutes 40` for a run to a solved
# Pong (26.4-30.2 min, median 26.9, over 3 seeds on a 2-core Zen 4 with torch kept to AVX2
# kernels in fp32; a real AVX2-only Zen 3 is about half as fast: there 20 minutes stay near
# the floor and 40 did not solve it, README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
. .venv/bin/activate
rapidrl train pqn --env pong --preset fast --max-minutes 20 "$@"
