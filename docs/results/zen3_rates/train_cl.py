"""PQN fast's network, one training step of 128 (2 threads), channels-last then contiguous,
twice; medians of 7 x 8 steps."""

import statistics
import time

import torch
from pqn_step import batch, build, train_step

torch.set_num_threads(2)
for rep in range(2):
    for cl in (True, False):
        net = build(cl)
        step = train_step(net, *batch())

        for _ in range(5):
            step()
        ts = []
        for r in range(7):
            t = time.perf_counter()
            for _ in range(8):
                step()
            ts.append((time.perf_counter() - t) / 8)
        m = statistics.median(ts)
        print(
            f"channels_last={cl}: {m * 1e3:.1f} ms per step of 128 -> {m * 16:.3f} s per update (16 steps), {m / 128 * 1e6:.0f} us/sample"
        )
