"""PPO on Atari Pong from rapidrl's pieces, in one file: read it top to bottom (CleanRL style).

The algorithm of `rapidrl train ppo --preset lean` (rl_games' Pong recipe on 52x52 frames, two
of them: KL-adaptive learning rate, input and value normalization) without the trainer around it
(run directory, checkpoints, resume, metrics.csv, first-ready env batches, the LSTM). The library
gives the vector env, the network with its normalizers, GAE, the PPO loss and the learning-rate
rule; this file wires them together. The defaults are lean's, so `python examples/ppo_pong.py`
is meant to solve Pong (mean of the last 100 games > 18); lean's measured runs took 13-16 min,
2.3-2.7M frames, on a 2-core Zen 3 (src/rapidrl/algos/ppo/config.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import deque

import numpy as np
import torch
from torch import nn

import rapidrl
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.learner import adapt_lr, make_policy
from rapidrl.algos.ppo.losses import ppo_loss
from rapidrl.hardware import cpu_count
from rapidrl.train.loop import env_options
from rapidrl.train.seeding import seed_everything, seed_of

LEAN = PRESETS["lean"]  # the flags' defaults, and every setting without a flag (gamma, clip, ...)
FRAME_SKIP = 4  # emulator frames per agent step on Atari: frames = agent steps x 4


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="PPO (rapidrl's lean preset) on Atari Pong.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,  # --help shows lean's values
    )
    p.add_argument("--num-envs", type=int, default=LEAN.num_envs, help="envs stepped together")
    p.add_argument("--num-steps", type=int, default=LEAN.num_steps, help="steps per env per update")
    p.add_argument("--total-frames", type=int, default=LEAN.max_frames, help="emulator frames")
    p.add_argument("--seed", type=int, default=LEAN.seed)
    p.add_argument("--lr", type=float, default=LEAN.lr, help="first Adam rate; then KL-adaptive")
    p.add_argument("--target-score", type=float, default=18.0, help="stop at mean-100 above it")
    p.add_argument("--threads", type=int, default=0, help="torch threads of the update; 0: all")
    p.add_argument("--backend", default=LEAN.backend, help="vector env backend (rapidrl.make_vec)")
    p.add_argument("--log-every", type=int, default=1, help="print a line every this many updates")
    return p.parse_args(argv)


def advantages(rewards, values, terminated, truncated, trunc_values, boot_values, gamma, lam):
    """GAE over a synchronous rollout: ``[T, N]`` tensors, ``boot_values [N]`` = V(the obs each
    env holds after the rollout). Returns ``(advantages, returns)``, both ``[T, N]``."""
    # next_values[t] = V(s_{t+1}) of the same game: the next step's value, after the last step
    # the bootstrap, and where a time limit cut the game V(final_obs) (the obs the env returned
    # there already opens the next game: same-step autoreset). Where terminated, gae ignores it.
    next_values = torch.cat([values[1:], boot_values[None]])  # [T, N]
    next_values = torch.where(truncated, trunc_values, next_values)
    return gae(rewards, values, next_values, terminated, truncated, gamma, lam)


def ppo_update(net, opt, cfg, gen, obs, actions, logprobs, values, adv, returns) -> float:
    """``cfg.epochs`` passes over one rollout (``[T, N]``; obs ``[T, N, C, H, W]`` uint8) in
    ``cfg.minibatches`` shuffled minibatches: what the library's Learner does with a rollout
    (tests/test_examples.py checks the two agree). Returns the mean approx_kl."""
    # Value normalization (rl_games' order): this rollout's returns join the running statistics
    # first; the critic then learns in that normalized scale (GAE ran in the return scale).
    net.value_rms.update(returns.flatten())
    values, returns = net.value_rms.normalize(values), net.value_rms.normalize(returns)
    # [T, N] -> [B = T * N]: the feed-forward net learns from shuffled single steps.
    flat = [x.flatten(0, 1) for x in (obs, actions, logprobs, values, adv, returns)]
    b_obs, b_act, b_logp, b_val, b_adv, b_ret = flat
    x = net.prepare(b_obs)  # [B, C, H, W] float: normalized (obs_rms) once, not per minibatch
    kls = []
    for _epoch in range(cfg.epochs):
        perm = torch.randperm(len(x), generator=gen).to(x.device)
        for idx in perm.tensor_split(cfg.minibatches):  # [B / minibatches] each
            out = net.evaluate(x[idx], b_act[idx])  # logprob, entropy, values (normalized)
            # The library's pure loss: clipped surrogate (clip 0.2), unclipped value loss (x2),
            # entropy bonus (0.01), advantages normalized per minibatch; and approx_kl.
            losses = ppo_loss(
                out.logprob, b_logp[idx], b_adv[idx], out.values, b_val[idx], b_ret[idx],
                out.entropy, clip_coef=cfg.clip, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
                clip_vloss=cfg.clip_vloss, norm_adv=cfg.norm_adv,
            )  # fmt: skip
            opt.zero_grad(set_to_none=True)
            losses["loss"].backward()
            nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            opt.step()
            # KL-adaptive rate after every step: /1.5 when approx_kl > 2 x 0.01, x1.5 when
            # below half of it, within [lr_min, lr_max].
            kls.append(float(losses["approx_kl"]))
            adapt_lr(opt, cfg, kls[-1])
    # The frames join the pixel statistics only now: acting and the update of this rollout saw
    # the same ones (so its first PPO ratios are exactly 1).
    net.obs_rms.update(b_obs)
    return sum(kls) / len(kls)


def main(argv=None) -> torch.nn.Module:
    """Train; return the network (tests compare it with the trainer's)."""
    args = parse_args(argv)
    # The preset with the flags applied: make_policy, env_options and adapt_lr read it.
    cfg = dataclasses.replace(
        LEAN, num_envs=args.num_envs, num_steps=args.num_steps, max_frames=args.total_frames,
        seed=args.seed, lr=args.lr, backend=args.backend,
    )  # fmt: skip
    cfg.validate()
    threads = args.threads or cpu_count()
    torch.set_num_threads(threads)  # before the network's initialization, as the trainer does
    seed_everything(cfg.seed)  # the network's initial weights draw from torch's global RNG
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # N Pong games behind the vector API. lean's Atari options: 52x52 grey frames, 2 stacked;
    # else the DQN protocol (no-op starts, frame skip 4, a lost life ends the learner's episode
    # (terminated), FIRE at reset, rewards clipped to their sign, a 108,000-frame game limit).
    envs = rapidrl.make_vec("pong", cfg.num_envs, cfg.backend, env_options=env_options(cfg, True))
    try:
        if envs.batch_size != cfg.num_envs:  # an autotuned first-ready layout
            raise SystemExit("this example steps all envs together: pass --backend hybrid")
        obs_shape = envs.single_observation_space.shape  # (2, 52, 52) uint8
        # The actor-critic of the preset: Nature CNN, obs_norm and value_norm on; bf16 where the
        # CPU multiplies it natively (precision auto), channels-last convolutions.
        net = make_policy(cfg, obs_shape, envs.single_action_space.n, device).to(device)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam)
        act_gen = torch.Generator(device).manual_seed(seed_of(cfg.seed, 1))  # as the trainer
        mb_gen = torch.Generator().manual_seed(seed_of(cfg.seed, 2))

        T, N = cfg.num_steps, cfg.num_envs
        obs = torch.zeros((T, N, *obs_shape), dtype=torch.uint8, device=device)
        actions = torch.zeros((T, N), dtype=torch.long, device=device)
        logprobs, values, rewards, trunc_values = torch.zeros((4, T, N), device=device)
        terminated, truncated = torch.zeros((2, T, N), dtype=torch.bool, device=device)

        next_obs, _ = envs.reset(seed=cfg.seed)  # [N, 2, 52, 52]; env i seeded with seed + i
        scores = deque(maxlen=100)  # real game scores (-21..21), not the clipped rewards
        frames, update, games, t0 = 0, 0, 0, time.perf_counter()
        while frames < cfg.max_frames:
            # 1. Rollout: T steps of every env. One thread: a batch of N observations gains
            #    nothing from more, and spinning threads take the cores the env workers need.
            torch.set_num_threads(1)
            for t in range(T):
                o = torch.as_tensor(next_obs, device=device)
                with torch.no_grad():
                    out = net.act(o, generator=act_gen)  # action, logprob, value: [N]
                obs[t], actions[t], logprobs[t], values[t] = o, out.action, out.logprob, out.value
                next_obs, r, term, trunc, infos = envs.step(out.action.cpu().numpy())
                rewards[t] = torch.as_tensor(r, device=device)
                terminated[t] = torch.as_tensor(term, device=device)
                truncated[t] = torch.as_tensor(trunc, device=device)
                cut = trunc & ~term  # a time limit, not a game over: bootstrap from V(final_obs)
                if cut.any():
                    with torch.no_grad():
                        v = net.value(torch.as_tensor(infos["final_obs"][cut], device=device))
                    trunc_values[t, torch.as_tensor(cut, device=device)] = v
                ended = infos["episode_end"]  # a game over (not a lost life)
                scores.extend(infos["episode_return"][ended].tolist())
                games += int(ended.sum())
                frames += N * FRAME_SKIP

            # 2. Advantages (return scale), bootstrapped from V(the obs each env holds now).
            with torch.no_grad():
                boot = net.value(torch.as_tensor(next_obs, device=device))  # [N]
            adv, ret = advantages(
                rewards, values, terminated, truncated, trunc_values, boot, cfg.gamma,
                cfg.gae_lambda,
            )  # fmt: skip

            # 3. PPO epochs, on --threads threads (default: every core).
            torch.set_num_threads(threads)
            kl = ppo_update(net, opt, cfg, mb_gen, obs, actions, logprobs, values, adv, ret)
            update += 1

            # 4. Log; stop once the last 100 games average above the target.
            mean100 = float(np.mean(scores)) if scores else float("nan")
            if update % args.log_every == 0:
                fps = frames / (time.perf_counter() - t0)
                print(
                    f"update {update} | frames {frames:,} | {fps:,.0f} frames/s | games "
                    f"{games} | mean-100 {mean100:+.1f} | lr {opt.param_groups[0]['lr']:.1e}"
                    f" | kl {kl:.4f}",
                    flush=True,
                )
            if len(scores) == scores.maxlen and mean100 > args.target_score:
                print(f"solved: mean of the last 100 games {mean100:+.1f} at {frames:,} frames")
                break
    finally:
        envs.close()
    return net


if __name__ == "__main__":  # required: the env worker processes re-import this file
    main()
