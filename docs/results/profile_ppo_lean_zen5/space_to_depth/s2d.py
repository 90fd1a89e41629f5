"""lean's network, first layer as nn.Conv2d (A) or SpaceToDepthConv2d (B): one minibatch's
forward + backward (2,048 prepared samples) and one acting forward (64 uint8 frames, no grad),
interleaved A/B, medians of 7. Usage: s2d.py fp32|bf16 [threads]"""
import dataclasses
import statistics
import sys
import time

import torch

from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
from space_to_depth_conv import SpaceToDepthConv2d  # this folder (round 1 had it in torso.py)

precision = sys.argv[1]
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
cfg = dataclasses.replace(PRESETS["lean"], precision=precision)
torch.manual_seed(0)
b = make_policy(cfg, (2, 52, 52), 6)
a = make_policy(cfg, (2, 52, 52), 6)
a.load_state_dict(b.state_dict())
# A: the first layer as built (nn.Conv2d); B: the same weights in SpaceToDepthConv2d. (In round
# 1 torso.py built SpaceToDepthConv2d and A got the nn.Conv2d: the same pair.)
first = SpaceToDepthConv2d(2, 32, 8, 4)
first.load_state_dict(a.torso.net[0].state_dict())
b.torso.net[0] = first.to(memory_format=torch.channels_last)
g = torch.Generator().manual_seed(0)
raw = torch.randint(0, 256, (2048, 2, 52, 52), dtype=torch.uint8, generator=g)
obs = b.prepare(raw)
actions = torch.randint(0, 6, (2048,), generator=g)
act_obs = raw[:64].clone()


def train_step(net):
    out = net.evaluate(obs, actions)
    loss = sum(t.float().mean() for t in out)
    net.zero_grad(set_to_none=True)
    loss.backward()


def act(net):
    with torch.no_grad():
        torch.set_num_threads(1)
        net.act(act_obs)
        torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)


def timed(fn, net, n=1):
    t = time.perf_counter()
    for _ in range(n):
        fn(net)
    return (time.perf_counter() - t) / n


with torch.no_grad():
    la, lb = a.evaluate(obs, actions), b.evaluate(obs, actions)
print("max |logprob A - B|", float((la.logprob - lb.logprob).abs().max()))
for net in (a, b, a, b):
    train_step(net)
    act(net)
res = {"A train": [], "B train": [], "A act": [], "B act": []}
for _ in range(7):
    for name, net in (("A", a), ("B", b)):
        res[f"{name} train"].append(timed(train_step, net))
        res[f"{name} act"].append(timed(act, net, 20))
for k, v in res.items():
    print(f"{precision} {k}: median {statistics.median(v) * 1000:.2f} ms (min {min(v) * 1000:.2f})")
print(f"{precision} train B/A {statistics.median(res['B train']) / statistics.median(res['A train']):.3f}"
      f"  act B/A {statistics.median(res['B act']) / statistics.median(res['A act']):.3f}")
