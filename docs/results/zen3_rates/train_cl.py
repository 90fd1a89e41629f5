import dataclasses
import statistics
import time

import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network

torch.set_num_threads(2)
cfg = PRESETS["fast"]
for rep in range(2):
    for cl in (True, False):
        torch.manual_seed(0)
        c = dataclasses.replace(cfg, channels_last=cl)
        net = make_pqn_network(c, (4, 64, 64), 6, torch.device("cpu"))
        if cl:
            net.to(memory_format=torch.channels_last)
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
