"""PQN fast's Learner.update with the rollout's frames converted to float once (as the learner
does) or per minibatch, alternated 6 times in one learner: medians of each."""

import dataclasses
import statistics
import time

import torch

import rapidrl.algos.pqn.learner as L
from rapidrl.algos.pqn.config import PRESETS

torch.set_num_threads(2)
cfg = dataclasses.replace(PRESETS["fast"], channels_last=False)
lrn = L.Learner(cfg, (4, 64, 64), 6, torch.device("cpu"))
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 255, (1024, 4, 64, 64), dtype=torch.uint8, generator=g)
actions = torch.randint(0, 6, (1024,), generator=g)
returns = torch.randn(1024, generator=g)
lrn.update(obs, actions, returns)
res = {2**27: [], 0: []}
for _ in range(6):
    for limit in (2**27, 0):
        L._PREPARE_MAX_ELEMENTS = limit  # 0: no rollout is converted whole
        t = time.perf_counter()
        lrn.update(obs, actions, returns)
        res[limit].append(time.perf_counter() - t)
for limit, ts in res.items():
    name = "prepare once" if limit else "per minibatch"
    print(name, round(statistics.median(ts), 3), [round(x, 3) for x in ts])
