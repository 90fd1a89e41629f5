import dataclasses, time, torch
from torch.profiler import profile, ProfilerActivity
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
cfg = dataclasses.replace(PRESETS["lean"], precision="bf16")
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (2048, 2, 52, 52), dtype=torch.uint8, generator=g)
actions = torch.randint(0, 6, (2048,), generator=g)
def step():
    out = net.evaluate(obs, actions)
    loss = sum(t.float().mean() for t in out)
    net.zero_grad(set_to_none=True); loss.backward()
for threads in (1, 2):
    torch.set_num_threads(threads)
    for _ in range(2): step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2): step()
    print(f"\n=== threads {threads}")
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key == "aten::convolution_backward":
            print(f"{e.self_cpu_time_total/2/1000:8.1f} ms  {str(e.input_shapes)[:150]}")
