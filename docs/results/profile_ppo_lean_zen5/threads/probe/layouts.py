import dataclasses, sys, time, torch
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
cfg = dataclasses.replace(PRESETS["lean"], precision=sys.argv[1], channels_last=sys.argv[2]=="1")
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (8192, 2, 52, 52), dtype=torch.uint8, generator=g)
obs = net.prepare(obs) if hasattr(net, "prepare") else obs
actions = torch.randint(0, 6, (8192,), generator=g)
torch.set_num_threads(2)
fw, bw = [], []
for i in range(6):
    t0 = time.perf_counter()
    out = net.evaluate(obs, actions)
    loss = out.logprob.float().mean() + out.values.float().mean() + out.entropy.float().mean()
    t1 = time.perf_counter()
    net.zero_grad(set_to_none=True)
    loss.backward()
    t2 = time.perf_counter()
    if i >= 2: fw.append(t1 - t0); bw.append(t2 - t1)
fw.sort(); bw.sort()
print(sys.argv[1:], f"forward {fw[1]*1000:.0f} ms backward {bw[1]*1000:.0f} ms (8192 samples, medians-ish)")
