#!/usr/bin/env bash
# Alone: lean's forward/backward per minibatch, channels-last on/off, bf16 / fp32 / fp32 AVX2-capped.
set -u  # with the project installed (the README's setup)
cd "$(dirname "$0")"
lscpu | grep "Model name"
for r in 1 2; do
  for a in "bf16 1" "bf16 0" "fp32 1" "fp32 0"; do python layouts.py $a; done
  for a in "fp32 1" "fp32 0"; do ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python layouts.py $a | sed 's/^/avx2 /'; done
done
for a in "bf16 1" "bf16 0"; do echo "## verbose $a"; ONEDNN_VERBOSE=1 python verbose_backward.py $a 2>&1 | awk '/=== backward 1/{p=1} p' | grep "exec,cpu,convolution" | awk -F, '{print $6, $7, $8, $NF, $(NF-1)}' | cut -c1-160; done
