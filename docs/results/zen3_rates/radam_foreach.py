"""PQN fast's training step (64x64, channels-last, minibatch 128, grad-norm clip 10) with RAdam's
per-tensor loop (torch's CPU default) against foreach=True, alternated in one process on all
cores. Prints ms per step for each round: `.venv/bin/python docs/results/zen3_rates/radam_foreach.py`."""

import time

import torch
from torch import nn
from torch.nn import functional as F

from pqn_step import batch, build


def timed(foreach: bool, steps: int = 40) -> float:
    net = build(True)
    opt = torch.optim.RAdam(net.parameters(), lr=1e-4, foreach=foreach)
    x, a, y = batch(128)
    x = net.prepare(x)

    def step():
        q = net(x).gather(1, a[:, None]).squeeze(1)
        loss = F.mse_loss(q, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 10.0, foreach=foreach)
        opt.step()

    for _ in range(5):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1e3


if __name__ == "__main__":
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for r in range(4):
        a, b = timed(False), timed(True)
        print(f"round {r}: per-tensor {a:.2f} ms, foreach {b:.2f} ms ({a / b:.3f}x)", flush=True)
