#!/usr/bin/env bash
# Creates .venv (if missing) and installs rapidrl into it with the given extras.
# torch==2.13.0 goes in first, alone: the package pins exactly that version, so pip never
# resolves a different (multi-gigabyte CUDA) build afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null \
  || python -m pip install -q torch==2.13.0
if [ -n "$extras" ]; then
  python -m pip install -q -e ".[$extras]"
else
  python -m pip install -q -e .
fi
