import ctypes, dataclasses, os, sys, time, torch
if sys.argv[2] == "1":
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    assert libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2**30) == 1
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
torch.set_num_threads(2)
cfg = dataclasses.replace(PRESETS["lean"], precision=sys.argv[1])
net = make_policy(cfg, (2, 52, 52), 6)
opt = torch.optim.Adam(net.parameters(), lr=1e-4, fused=True)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (8192, 2, 52, 52), dtype=torch.uint8, generator=g)
actions = torch.randint(0, 6, (8192,), generator=g)
def update():
    prep = net.prepare(obs)
    for _ in range(4):
        for idx in torch.randperm(8192, generator=g).tensor_split(4):
            out = net.evaluate(prep[idx], actions[idx])
            loss = -out.logprob.mean() + out.values.float().square().mean() - 0.01 * out.entropy.mean()
            opt.zero_grad(set_to_none=True); loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0); opt.step()
update(); ts = []
for _ in range(3):
    t0 = time.perf_counter(); update(); ts.append(time.perf_counter() - t0)
print(sys.argv[1], "no-mmap" if sys.argv[2] == "1" else "default", f"one lean update (16 minibatches of 2,048): {sorted(ts)[1]:.3f} s")
