"""Per-op CPU time of lean's forward + backward on a minibatch of 2,048 (fp32), grouped by
input shape, with each op's multiply-adds and GFLOP/s."""
import dataclasses
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy

torch.set_num_threads(2)
cfg = dataclasses.replace(PRESETS["lean"], precision="fp32")
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
n = 2048
obs = net.prepare(torch.randint(0, 256, (n, 2, 52, 52), dtype=torch.uint8, generator=g))
actions = torch.randint(0, 6, (n,), generator=g)


def step():
    out = net.evaluate(obs, actions)
    loss = sum(t.float().mean() for t in out)
    net.zero_grad(set_to_none=True)
    loss.backward()


for _ in range(3):
    step()
reps = 4
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(reps):
        step()
rows = []
for e in prof.key_averages(group_by_input_shape=True):
    if e.self_cpu_time_total / reps / 1000 >= 0.5:
        rows.append((e.self_cpu_time_total / reps / 1000, e.key, str(e.input_shapes)[:110]))
total = sum(r[0] for r in rows)
print(f"{sys.argv[1] if len(sys.argv) > 1 else ''} per minibatch of {n}: ops >= 0.5 ms sum {total:.1f} ms")
for ms, key, shapes in sorted(rows, reverse=True):
    print(f"{ms:8.1f} ms  {key:40s} {shapes}")
