import time

import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network

cfg = PRESETS["fast"]
for cl in (True, False):
    import dataclasses

    c = dataclasses.replace(cfg, channels_last=cl)
    net = make_pqn_network(c, (4, 64, 64), 6, torch.device("cpu"))
    if cl:
        net.to(memory_format=torch.channels_last)
    net.eval()
    x = torch.randint(0, 255, (32, 4, 64, 64), dtype=torch.uint8)
    for th in (1, 2):
        torch.set_num_threads(th)
        with torch.no_grad():
            for _ in range(20):
                net(x)
            ts = []
            for r in range(5):
                t = time.perf_counter()
                for _ in range(50):
                    net(x)
                ts.append((time.perf_counter() - t) / 50)
        ts.sort()
        print(
            f"channels_last={cl} threads={th}: {ts[2] * 1e3:.2f} ms per batch of 32 -> {ts[2] * 32:.3f} s per 1024 steps"
        )
