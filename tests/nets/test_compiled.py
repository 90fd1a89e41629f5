"""``compile_methods`` (the trainers' ``--compile``): the compiled net computes what the eager
net computes (fp32), gradients included, and keeps the eager module's state_dict."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch._dynamo.utils import counters

from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import make_policy
from rapidrl.nets.compiled import compile_methods, cpp_compiler

pytestmark = [
    pytest.mark.slow,  # a compile takes ~10-20 s on 2 cores
    pytest.mark.skipif(cpp_compiler() is None, reason="torch.compile on CPU needs a C++ compiler"),
]


def test_compiled_lean_net_equals_the_eager_one():
    cfg = dataclasses.replace(PRESETS["lean"], env="pong", precision="fp32")
    torch.manual_seed(0)
    eager = make_policy(cfg, (2, 52, 52), 6)
    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (64, 2, 52, 52), dtype=torch.uint8, generator=g)
    eager.obs_rms.update(torch.randint(0, 256, (256, 2, 52, 52), dtype=torch.uint8, generator=g))
    eager.value_rms.update(torch.randn(256, generator=g) * 3 + 1)
    comp = make_policy(cfg, (2, 52, 52), 6)
    comp.load_state_dict(eager.state_dict())
    keys = list(eager.state_dict())
    compile_methods(comp, "forward", "evaluate")
    assert list(comp.state_dict()) == keys  # checkpoints and published weights unchanged
    graphs = counters["stats"]["unique_graphs"]

    with torch.no_grad():  # acting: forward on raw uint8 frames
        for a, b in zip(eager(obs), comp(obs)):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)

    actions = torch.randint(0, 6, (64,), generator=g)
    grads = []
    for net in (eager, comp):  # the update: evaluate on prepared frames, then backward
        out = net.evaluate(net.prepare(obs), actions)
        (out.logprob.mean() + 0.01 * out.entropy.mean() + out.values.square().mean()).backward()
        grads.append([p.grad.clone() for p in net.parameters()])
        if net is eager:
            ref = out
    for name in ("logprob", "entropy", "values"):
        torch.testing.assert_close(getattr(out, name), getattr(ref, name), rtol=1e-5, atol=1e-5)
    for ge, gc in zip(*grads):
        torch.testing.assert_close(gc, ge, rtol=1e-4, atol=1e-6)
    assert counters["stats"]["unique_graphs"] >= graphs + 2  # forward and evaluate did compile
