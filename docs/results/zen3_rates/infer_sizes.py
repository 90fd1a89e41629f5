"""Acting cost of PQN fast's network: a batch of 32 (or 64) uint8 observations, no grad, at
52x52 and 64x64, channels-last and contiguous, 1 and 2 torch threads; medians of 5 x 50
forwards, two alternations (this VM drifts: compare within a round)."""

import dataclasses
import time

import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network


def forward_ms(size: int, cl: bool, threads: int, n: int) -> float:
    cfg = dataclasses.replace(PRESETS["fast"], channels_last=cl, obs_size=size)
    torch.manual_seed(0)
    net = make_pqn_network(cfg, (4, size, size), 6, torch.device("cpu")).eval()
    x = torch.randint(0, 255, (n, 4, size, size), dtype=torch.uint8)
    torch.set_num_threads(threads)
    ts = []
    with torch.no_grad():
        for _ in range(20):
            net(x)
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(50):
                net(x)
            ts.append((time.perf_counter() - t) / 50)
    return sorted(ts)[2] * 1e3


for rnd in (1, 2):
    for size in (52, 64):
        for n in (32, 64):
            cells = []
            for cl in (True, False):
                for th in (1, 2):
                    ms = forward_ms(size, cl, th, n)
                    cells.append(f"{'cl' if cl else 'contig'}/{th}t {ms:5.2f}")
            print(f"round {rnd} size {size} batch {n}: " + "  ".join(cells) + " ms", flush=True)
