"""Wall time of lean's forward + backward on a minibatch of 2,048 (fp32, 2 threads): oneDNN's
convolutions against ATen's own (im2col + GEMM), per layer."""
import dataclasses, statistics, sys, time
import torch
from torch import nn
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy

torch.set_num_threads(2)
cl = sys.argv[1] == "cl" if len(sys.argv) > 1 else True
cfg = dataclasses.replace(PRESETS["lean"], precision="fp32", channels_last=cl)
net = make_policy(cfg, (2, 52, 52), 6)
convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
print("convs", [(m.in_channels, m.out_channels, m.kernel_size, m.stride) for m in convs], "channels_last", cl)
orig = [m.forward for m in convs]

def set_off(which):
    for i, m in enumerate(convs):
        if i in which:
            f = orig[i]
            def fwd(x, f=f):
                with torch.backends.mkldnn.flags(enabled=False):
                    return f(x)
            m.forward = fwd
        else:
            m.forward = orig[i]

g = torch.Generator().manual_seed(0)
n = 2048
obs = net.prepare(torch.randint(0, 256, (n, 2, 52, 52), dtype=torch.uint8, generator=g))
actions = torch.randint(0, 6, (n,), generator=g)

def step():
    out = net.evaluate(obs, actions)
    loss = sum(t.float().mean() for t in out)
    net.zero_grad(set_to_none=True)
    loss.backward()

variants = {"onednn": (), "aten all": (0, 1, 2), "aten c1": (0,), "aten c2": (1,), "aten c3": (2,), "aten c2c3": (1, 2)}
res = {k: [] for k in variants}
grads = {}
for r in range(5):
    for k, which in variants.items():
        set_off(which)
        for _ in range(2):
            step()
        ts = []
        for _ in range(5):
            t = time.perf_counter(); step(); ts.append(time.perf_counter() - t)
        res[k].append(statistics.median(ts))
        if r == 0:
            torch.manual_seed(0); step()
            grads[k] = [p.grad.clone() for p in net.parameters() if p.grad is not None]
for k in variants:
    d = max((a - b).abs().max().item() for a, b in zip(grads[k], grads["onednn"]))
    print(f"{k:12s} median {1000*statistics.median(res[k]):7.1f} ms  rounds {[round(1000*x,1) for x in res[k]]}  max|grad diff| {d:.2e}")
