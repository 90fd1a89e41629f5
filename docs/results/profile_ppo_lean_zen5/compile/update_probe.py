"""Issue 36 probe 2: in one fresh process, a lean PPO update (16 minibatches of 2,048 on Pong-shaped
data) eager, then with net.evaluate under torch.compile (first update = with compile, then
median), and acting (net.act on 32 frames) eager vs net.forward compiled. argv: precision."""
import dataclasses, statistics, sys, time
import torch
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import PPOLearner, TrainBatch, update_policy, normalize_values

prec = sys.argv[1]
cfg = dataclasses.replace(PRESETS["lean"], env="pong", precision=prec)
T, N = cfg.num_steps, cfg.num_envs
def make():
    torch.manual_seed(0)
    return PPOLearner(cfg, (2, 52, 52), 6, torch.device("cpu"))
g = torch.Generator().manual_seed(1)
obs = torch.randint(0, 255, (T, N, 2, 52, 52), dtype=torch.uint8, generator=g)
acts = torch.randint(0, 6, (T, N), generator=g)
f = lambda: torch.randn(T, N, generator=g)
batch = TrainBatch(obs, acts, -1.79 + 0.1 * f(), f(), f(), f(), torch.zeros(T, N, dtype=torch.bool),
                   torch.ones(T, N, dtype=torch.bool), torch.full((N,), T), None)
def run(lrn, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        update_policy(lrn.net, lrn.opt, normalize_values(lrn.net, batch), cfg, lrn.mb_gen)
        ts.append(time.perf_counter() - t)
    return ts
def act_times(fn, n=200):
    x = obs[0, :32]
    ts = []
    with torch.no_grad():
        for _ in range(n):
            t = time.perf_counter(); fn(x); ts.append(time.perf_counter() - t)
    return ts
lrn = make()
e = run(lrn, 5)
ae = act_times(lrn.net.forward)
lrn = make()
lrn.net.evaluate = torch.compile(lrn.net.evaluate)
c = run(lrn, 5)
fwd = torch.compile(lrn.net.forward)
t = time.perf_counter()
with torch.no_grad():
    fwd(obs[0, :32])
act_compile = time.perf_counter() - t
ac = act_times(fwd)
lrn = make()
e2 = run(lrn, 3)
med = statistics.median
print(f"{prec}: update eager {med(e[1:]):.3f} s (then {med(e2):.3f}); compiled: first {c[0]:.2f} s "
      f"(compile ~{c[0] - med(c[1:]):.1f} s), then {med(c[1:]):.3f} s; ratio {med(c[1:]) / med(e[1:] + e2):.3f}")
print(f"{prec}: act(32) eager {1e3 * med(ae[20:]):.2f} ms, compiled forward {1e3 * med(ac[20:]):.2f} ms "
      f"(first call {act_compile:.1f} s)")
