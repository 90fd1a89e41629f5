"""Alone: the pieces of lean's update 'rest' on a real-size rollout (8,192 x [2, 52, 52] uint8)."""
import dataclasses, sys, time, torch
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
from rapidrl.nets import normalize
torch.set_num_threads(2)
prec = sys.argv[1]
cfg = dataclasses.replace(PRESETS["lean"], precision=prec)
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (8192, 2, 52, 52), dtype=torch.uint8, generator=g)
def t(fn, n=5):
    fn(); ts = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return sorted(ts)[n // 2] * 1000
def old_update():
    per = obs[0].numel(); s1 = torch.zeros((2, 52, 52), dtype=torch.float64); s2 = torch.zeros_like(s1)
    for chunk in obs.split(max(1, 2**22 // per)):
        c = chunk.to(torch.float64); s1 += c.sum(0); s2 += c.square().sum(0)
prep = net.prepare(obs)
print(prec, f"prepare (once an update) {t(lambda: net.prepare(obs)):.1f} ms")
perm = torch.randperm(8192, generator=g)
idx = perm[:2048]
print(prec, f"one minibatch gather of 2,048 prepared {t(lambda: prep[idx]):.2f} ms; x16 an update")
out = net.evaluate(prep[idx], torch.zeros(2048, dtype=torch.long))
(out.logprob.float().mean() + out.values.float().mean()).backward()
print(prec, f"clip_grad_norm_ {t(lambda: torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)):.2f} ms; x16 an update")
buf = torch.empty((2048, *prep.shape[1:]), dtype=prep.dtype).contiguous(memory_format=torch.channels_last) if prep.is_contiguous(memory_format=torch.channels_last) and not prep.is_contiguous() else torch.empty((2048, *prep.shape[1:]), dtype=prep.dtype)
def into():
    torch.index_select(prep, 0, idx, out=buf)
print(prec, f"gather into a kept buffer {t(into):.2f} ms; layout cl={prep.is_contiguous(memory_format=torch.channels_last)} buf cl={buf.is_contiguous(memory_format=torch.channels_last)}", torch.equal(buf, prep[idx]))
