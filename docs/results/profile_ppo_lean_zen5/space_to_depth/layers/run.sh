#!/usr/bin/env bash
cd /work/main; . .venv/bin/activate
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python /work/probes/fp32/layers.py avx2-fp32 > /work/probes/fp32/avx2.txt 2>&1
python /work/probes/fp32/layers.py avx512-fp32 > /work/probes/fp32/avx512.txt 2>&1
ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_VERBOSE=1 python - > /work/probes/fp32/verbose.txt 2>&1 <<'PY'
import dataclasses, torch
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
torch.set_num_threads(2)
net = make_policy(dataclasses.replace(PRESETS["lean"], precision="fp32"), (2, 52, 52), 6)
obs = net.prepare(torch.randint(0, 256, (2048, 2, 52, 52), dtype=torch.uint8))
a = torch.randint(0, 6, (2048,))
for i in range(3):
    if i == 2: print("=== measured step")
    out = net.evaluate(obs, a); loss = sum(t.float().mean() for t in out)
    net.zero_grad(set_to_none=True); loss.backward()
PY
