"""Which op of PPO lean's bf16 backward does not use the second core: per-op self CPU time of
forward + backward of one 2,048-sample minibatch at 1 and 2 torch threads."""
import dataclasses, sys, time
import torch
from torch.profiler import profile, ProfilerActivity
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy

precision = sys.argv[1] if len(sys.argv) > 1 else "bf16"
channels_last = (sys.argv[2] if len(sys.argv) > 2 else "1") == "1"
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 14
cfg = dataclasses.replace(PRESETS["lean"], precision=precision, channels_last=channels_last)
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (2048, 2, 52, 52), dtype=torch.uint8, generator=g)
actions = torch.randint(0, 6, (2048,), generator=g)

def step():
    out = net.evaluate(obs, actions) if hasattr(net, "evaluate") else None
    loss = sum(t.float().mean() for t in (out if isinstance(out, tuple) else [out]) if t is not None)
    net.zero_grad(set_to_none=True)
    loss.backward()

for threads in (1, 2):
    torch.set_num_threads(threads)
    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(5):
        step()
    per = (time.perf_counter() - t0) / 5
    print(f"\n=== {precision} channels_last={channels_last} threads {threads}: "
          f"{per * 1000:.0f} ms per forward+backward")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))
