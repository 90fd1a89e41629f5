#!/usr/bin/env bash
# Installs rapidrl with its test extras and runs the whole test suite:
# stage 1 the default (fast) tests, stage 2 the tests marked slow (learning checks).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh test,envpool,ray,sb3
. .venv/bin/activate
ruff check src tests
python -m pytest -q -p no:cacheprovider "$@"
# exit code 5 = no test selected (no slow tests in this selection): not a failure.
python -m pytest -q -p no:cacheprovider -m slow "$@" || [ $? -eq 5 ]
