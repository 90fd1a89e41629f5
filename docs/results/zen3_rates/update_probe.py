"""PQN fast's Learner.update (16 steps of 128) on a synthetic 1,024-sample rollout, contiguous
and channels-last, medians of 7 (compare with train_cl.py's bare steps)."""

import dataclasses
import statistics
import time

import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import Learner

torch.set_num_threads(2)
for cl in (False, True):
    cfg = dataclasses.replace(PRESETS["fast"], channels_last=cl)
    lrn = Learner(cfg, (4, 64, 64), 6, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 255, (1024, 4, 64, 64), dtype=torch.uint8, generator=g)
    actions = torch.randint(0, 6, (1024,), generator=g)
    returns = torch.randn(1024, generator=g)
    lrn.update(obs, actions, returns)
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        lrn.update(obs, actions, returns)
        ts.append(time.perf_counter() - t)
    print(
        f"channels_last={cl}: Learner.update of 1,024 samples (16 steps of 128): median {statistics.median(ts):.3f} s, all {[round(x, 3) for x in ts]}"
    )
