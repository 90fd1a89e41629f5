"""Forward + backward wall time of candidate torsos at 52x52x2, minibatch 2,048, fp32 channels-last,
2 threads, with a 6-action policy head and a value head; medians."""
import statistics, sys, time
import torch
from torch import nn
torch.set_num_threads(2)

def torso(spec, fc):
    layers, c, h = [], 2, 52
    for oc, k, s in spec:
        layers += [nn.Conv2d(c, oc, k, stride=s), nn.ReLU()]
        c, h = oc, (h - k) // s + 1
    layers += [nn.Flatten(), nn.Linear(c * h * h, fc), nn.ReLU()]
    macs, hh, cc = 0, 52, 2
    for oc, k, s in spec:
        hh = (hh - k) // s + 1; macs += hh * hh * oc * k * k * cc; cc = oc
    macs += c * h * h * fc
    return nn.Sequential(*layers), macs

specs = {
    "32-48-48 fc512": ([(32, 8, 4), (48, 4, 2), (48, 3, 1)], 512),
    "32-64-32 fc512": ([(32, 8, 4), (64, 4, 2), (32, 3, 1)], 512),
    "32-32-64 fc512": ([(32, 8, 4), (32, 4, 2), (64, 3, 1)], 512),
    "32-48-64 fc512": ([(32, 8, 4), (48, 4, 2), (64, 3, 1)], 512),
    "nature 32-64-64 fc512": ([(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512),
    "32-32-32 fc512": ([(32, 8, 4), (32, 4, 2), (32, 3, 1)], 512),
}
x = torch.rand(2048, 2, 52, 52).contiguous(memory_format=torch.channels_last)
a = torch.randint(0, 6, (2048,))
res = {k: [] for k in specs}
nets = {}
for k, (spec, fc) in specs.items():
    t, macs = torso(spec, fc)
    net = nn.ModuleDict(dict(t=t, pi=nn.Linear(fc, 6), v=nn.Linear(fc, 1))).to(memory_format=torch.channels_last)
    nets[k] = (net, macs)
def step(net):
    h = net["t"](x)
    logits, v = net["pi"](h), net["v"](h)
    lp = torch.log_softmax(logits, -1).gather(1, a[:, None])
    loss = lp.mean() + v.mean()
    net.zero_grad(set_to_none=True)
    loss.backward()
for r in range(4):
    for k, (net, macs) in nets.items():
        for _ in range(2): step(net)
        ts = []
        for _ in range(5):
            t0 = time.perf_counter(); step(net); ts.append(time.perf_counter() - t0)
        res[k].append(statistics.median(ts))
base = statistics.median(res["nature 32-64-64 fc512"])
for k, (net, macs) in nets.items():
    m = statistics.median(res[k])
    print(f"{k:26s} {macs/1e6:5.2f} M MAC/sample  {1000*m:6.1f} ms  x{base/m:4.2f}  params {sum(p.numel() for p in net.parameters())/1e3:.0f}k")
