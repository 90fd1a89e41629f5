"""PQN fast's network, contiguous vs channels-last (with LayoutLayerNorm): a training step of 128
with RAdam (2 threads) and acting on 32 observations (1 thread), alternated 4 times."""

import statistics
import time

import torch
from pqn_step import batch, build, train_step

torch.set_num_threads(2)
x, a, y = batch()
n0, n1 = build(False), build(True)
print("fwd diff:", (n0(x) - n1(x)).abs().max().item())
xs32 = torch.randint(0, 255, (32, 4, 64, 64), dtype=torch.uint8)
for rep in range(4):
    for cl in (False, True):
        net = build(cl)
        step = train_step(net, x, a, y)

        for _ in range(3):
            step()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(4):
                step()
            ts.append((time.perf_counter() - t) / 4)
        torch.set_num_threads(1)
        with torch.no_grad():
            for _ in range(3):
                net(xs32)
            ta = []
            for _ in range(10):
                t = time.perf_counter()
                net(xs32)
                ta.append(time.perf_counter() - t)
        torch.set_num_threads(2)
        m = statistics.median(ts)
        ma = statistics.median(ta)
        print(
            f"rep{rep} channels_last={cl!s:5}: train step of 128 {m * 1e3:.1f} ms ({m / 128 * 1e6:.0f} us/sample); act 32 1-thread {ma * 1e3:.2f} ms",
            flush=True,
        )
