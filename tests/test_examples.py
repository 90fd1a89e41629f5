"""examples/ppo_pong.py: its pieces equal the library's, its run equals the trainer's, and it runs
as a script."""

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.learner import (
    TrainBatch,
    make_policy,
    normalize_values,
    rollout_advantages,
    update_policy,
)
from rapidrl.train.checkpoint import load_latest
from rapidrl.train.loop import num_threads

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ppo_pong.py"


def load_example():
    spec = importlib.util.spec_from_file_location("ppo_pong_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines functions only: main() is behind __name__
    return module


def random_rollout(t_len, n_env, seed=0):
    g = torch.Generator().manual_seed(seed)
    flags = torch.rand((2, t_len, n_env), generator=g)
    return dict(
        rewards=torch.randint(-1, 2, (t_len, n_env), generator=g).float(),
        values=torch.randn((t_len, n_env), generator=g),
        terminated=flags[0] < 0.1,
        truncated=flags[1] < 0.1,
        trunc_values=torch.randn((t_len, n_env), generator=g),
    )


def test_example_advantages_equal_the_librarys():
    ex = load_example()
    r = random_rollout(32, 5)
    boot = torch.randn(5)
    adv, ret = ex.advantages(**r, boot_values=boot, gamma=0.99, lam=0.95)
    lengths = torch.full((5,), 32)
    lib_adv, lib_ret, valid = rollout_advantages(
        r["rewards"], r["values"], r["terminated"], r["truncated"], r["trunc_values"],
        lengths, boot, 0.99, 0.95,
    )  # fmt: skip
    assert bool(valid.all())
    assert torch.equal(adv, lib_adv) and torch.equal(ret, lib_ret)


@num_threads(1)  # the test machine is shared: contended OpenMP threads stall
def test_example_update_equals_the_learners():
    """ppo_update on one rollout == what the Learner does with it: value statistics merged and
    values normalized, update_policy, the frames merged into the pixel statistics."""
    ex = load_example()
    cfg = dataclasses.replace(PRESETS["lean"], num_envs=4, num_steps=8)
    t_len, n_env, shape = 8, 4, (2, 52, 52)
    torch.manual_seed(0)
    net = make_policy(cfg, shape, 6)
    lib_net = make_policy(cfg, shape, 6)
    lib_net.load_state_dict(net.state_dict())
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr, eps=cfg.adam_eps) for m in (net, lib_net)]
    g = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 256, (t_len, n_env, *shape), dtype=torch.uint8, generator=g)
    actions = torch.randint(0, 6, (t_len, n_env), generator=g)
    logprobs = -torch.rand((t_len, n_env), generator=g) - 1.0
    values, adv = torch.randn((2, t_len, n_env), generator=g)
    returns = values + adv

    ex.ppo_update(
        net, opts[0], cfg, torch.Generator().manual_seed(2), obs, actions, logprobs, values,
        adv, returns,
    )  # fmt: skip
    batch = TrainBatch(
        obs, actions, logprobs, values, adv, returns,
        starts=torch.zeros((t_len, n_env), dtype=torch.bool),
        valid=torch.ones((t_len, n_env), dtype=torch.bool),
        lengths=torch.full((n_env,), t_len), init_state=None,
    )  # fmt: skip
    stats = update_policy(
        lib_net, opts[1], normalize_values(lib_net, batch), cfg, torch.Generator().manual_seed(2)
    )
    lib_net.obs_rms.update(obs.flatten(0, 1))

    assert stats["grad_steps"] == cfg.epochs * cfg.minibatches
    assert opts[0].param_groups[0]["lr"] == opts[1].param_groups[0]["lr"] != cfg.lr  # adapted
    ours, theirs = net.state_dict(), lib_net.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:  # weights and both normalizers' statistics
        assert torch.equal(ours[k], theirs[k]), k


# The sizes of the short runs: 4 envs x 16 steps = 256 frames per update.
TINY = ["--num-envs", "4", "--num-steps", "16", "--threads", "1"]


@pytest.mark.slow
def test_example_run_equals_the_trainers(tmp_path):
    """Three updates of the example and of `rapidrl train ppo --preset lean` with the same sizes
    and seed end with the same network, bit for bit: the pieces compose into the trainer."""
    from rapidrl.algos.ppo.train import train

    ex = load_example()
    before = torch.get_num_threads()
    try:
        net = ex.main([*TINY, "--total-frames", "768", "--backend", "serial", "--seed", "3"])
    finally:
        torch.set_num_threads(before)  # main() sets the count of this process
    cfg = dataclasses.replace(
        PRESETS["lean"], num_envs=4, num_steps=16, max_frames=768, backend="serial", seed=3,
        torch_threads=1, run_dir=str(tmp_path / "run"), no_progress=True, tensorboard=False,
    )  # fmt: skip
    summary = train(cfg)
    assert summary["frames"] == 768
    theirs = load_latest(tmp_path / "run", read_only=True).state["net"]
    ours = net.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:
        assert torch.equal(ours[k], theirs[k]), k


@pytest.mark.slow
def test_example_runs_as_a_script():
    # The default backend (auto: worker processes that re-import the script), 4 updates.
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), *TINY, "--total-frames", "1024"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    frames = [
        int(f.replace(",", ""))
        for f in re.findall(r"^update \d+ \| frames ([\d,]+) \|", out.stdout, re.M)
    ]
    assert frames == [256, 512, 768, 1024], out.stdout
    assert "frames/s" in out.stdout and "mean-100" in out.stdout
