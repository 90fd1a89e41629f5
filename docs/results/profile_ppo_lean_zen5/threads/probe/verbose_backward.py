import dataclasses, sys, torch
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
cfg = dataclasses.replace(PRESETS["lean"], precision=sys.argv[1], channels_last=sys.argv[2]=="1")
net = make_policy(cfg, (2, 52, 52), 6)
g = torch.Generator().manual_seed(0)
obs = torch.randint(0, 256, (2048, 2, 52, 52), dtype=torch.uint8, generator=g)
actions = torch.randint(0, 6, (2048,), generator=g)
torch.set_num_threads(2)
for i in range(2):
    out = net.evaluate(obs, actions)
    loss = out.logprob.float().mean() + out.values.float().mean() + out.entropy.float().mean()
    net.zero_grad(set_to_none=True)
    print("=== backward", i, flush=True)
    loss.backward()
