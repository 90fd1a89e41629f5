"""torch.profiler over 10 training steps of 128 (RAdam, 2 threads) of PQN fast's network, ops by
self CPU time: `python layer_prof.py contig` (contiguous) or `python layer_prof.py cl`
(channels-last, with the layout-keeping LayerNorm)."""

import dataclasses
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network

torch.set_num_threads(2)
cl = sys.argv[1] == "cl"
cfg = dataclasses.replace(PRESETS["fast"], channels_last=cl)
torch.manual_seed(0)
net = make_pqn_network(cfg, (4, 64, 64), 6, torch.device("cpu"))
opt = torch.optim.RAdam(net.parameters(), lr=1e-4)
x = torch.randint(0, 255, (128, 4, 64, 64), dtype=torch.uint8)
a = torch.randint(0, 6, (128,))
y = torch.randn(128)


def step():
    q = net(x).gather(1, a[:, None]).squeeze(1)
    loss = (q - y).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


for _ in range(5):
    step()
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(10):
        step()
print(
    prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total",
        row_limit=25,
        max_name_column_width=40,
        max_shapes_column_width=60,
    )
)
