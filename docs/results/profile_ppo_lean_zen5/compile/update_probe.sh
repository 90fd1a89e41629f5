#!/usr/bin/env bash
# Cold (empty inductor cache) then warm (the same cache), fp32 capped to AVX2, then bf16.
cd /work/main && . .venv/bin/activate
out=./update_probe.txt; lscpu | grep "Model name" > $out
rm -rf /tmp/ind_fp32 /tmp/ind_bf16
for c in cold warm; do
  TORCHINDUCTOR_CACHE_DIR=/tmp/ind_fp32 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 timeout 300 python ./update_probe.py fp32 2>&1 | sed "s/^/$c capped: /" >> $out
done
for c in cold warm; do
  TORCHINDUCTOR_CACHE_DIR=/tmp/ind_bf16 timeout 300 python ./update_probe.py bf16 2>&1 | sed "s/^/$c: /" >> $out
done
echo done >> $out
