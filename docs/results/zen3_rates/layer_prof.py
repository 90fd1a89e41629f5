"""torch.profiler over 10 training steps of 128 (RAdam, 2 threads) of PQN fast's network, ops by
self CPU time: `python layer_prof.py contig` (contiguous) or `python layer_prof.py cl`
(channels-last, with the layout-keeping LayerNorm)."""

import sys

import torch
from pqn_step import batch, build, train_step
from torch.profiler import ProfilerActivity, profile

torch.set_num_threads(2)
net = build(sys.argv[1] == "cl")
step = train_step(net, *batch())
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
