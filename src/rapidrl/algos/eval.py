"""``rapidrl eval RUN_DIR``: play a trained agent, report its scores, optionally record a video.

Algorithm-agnostic: the run's ``config.json`` names the algorithm (``"algo"``; else the newest
checkpoint's), and a *policy loader* registered for it builds the policy::

    loader(config: dict, ckpt: rapidrl.train.Checkpoint, device: str)
        -> (act, env_id, env_options)      # act(obs [B, *obs_shape]) -> actions [B], greedy;
                                           # an optional act.reset() is called per episode

A loader of a stochastic policy (PPO) also takes ``sample: bool, seed: int``: with ``sample``
its ``act`` draws each action from the policy's distribution, as in training (``--sample``):
the training curve's scores are those of the sampled policy, a greedy eval may score more.

``register_policy_loader("ppo", "rapidrl.algos.ppo.train:eval_policy")`` (a callable or a lazy
``"module:function"`` path) adds an algorithm; :func:`restore_for_eval` is the start of every
loader (the run's config, its env, the net with the checkpoint's weights) and
:func:`greedy_actions` the ``act`` of a Q-network (DQN, PQN). Evaluation plays full games: ``episodic_life`` is
switched off and rewards are unclipped (the real score), on one env built with ``make_env``; the
actions are greedy, or epsilon-greedy with ``--epsilon`` (0.01 is a common Atari protocol that
avoids getting stuck). ``--video out.mp4`` records the first ``--video-episodes`` episodes from the
RGB frames (``render_mode="rgb_array"``) with ``cv2.VideoWriter``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import tyro

from rapidrl.config import ConfigError, config_from_dict
from rapidrl.train.run import atomic_write_text

__all__ = [
    "EvalConfig",
    "evaluate",
    "final_eval",
    "greedy_actions",
    "main",
    "policy_loaders",
    "register_policy_loader",
    "restore_for_eval",
]

_LOADERS: dict[str, Callable | str] = {
    "dqn": "rapidrl.algos.dqn.train:eval_policy",
    "ppo": "rapidrl.algos.ppo.train:eval_policy",
    "pqn": "rapidrl.algos.pqn.train:eval_policy",
    "sac": "rapidrl.algos.sac.train:eval_policy",
}


def register_policy_loader(algo: str, loader: Callable | str) -> None:
    """Register ``loader`` (a callable, or ``"module:function"`` imported on first use) for runs
    whose config names ``algo``."""
    _LOADERS[algo] = loader


def policy_loaders() -> list[str]:
    return sorted(_LOADERS)


def _loader(algo: str) -> Callable:
    if algo not in _LOADERS:
        raise ConfigError(
            f"no policy loader for algo {algo!r}; known: {', '.join(policy_loaders())}. "
            "A trainer adds one with rapidrl.algos.eval.register_policy_loader"
        )
    loader = _LOADERS[algo]
    if isinstance(loader, str):
        module, _, name = loader.partition(":")
        loader = getattr(importlib.import_module(module), name)
        _LOADERS[algo] = loader
    return loader


def restore_for_eval(
    config_cls: type,
    label: str,
    make_net: Callable[..., Any],
    config: dict[str, Any],
    ckpt,
    device: str,
    key: str = "net",
    continuous: bool = False,
    discrete: bool = True,
) -> tuple[Any, Any, Any]:
    """``(cfg, env, net)`` of a loader: the run's config (``config_cls`` from its config.json
    dict), its probe env (``label`` names the algorithm in errors) and the network
    ``make_net(cfg, obs_shape, n_actions, device)`` on ``device`` with the checkpoint's weights
    (saved under ``key``; a clear CheckpointError when they do not fit), in eval mode.
    ``continuous``: the algorithm takes Box actions too (PPO): ``make_net`` then gets
    ``continuous=True`` for an env that has them; ``discrete=False``: Box actions only (SAC)."""
    from rapidrl.train.loop import probe_env

    cfg = config_from_dict(config_cls, config)
    env = probe_env(cfg, label, continuous=continuous, discrete=discrete)
    kwargs = {"continuous": True} if env.continuous else {}
    net = make_net(cfg, env.obs_shape, env.n_actions, device, **kwargs).to(device)
    ckpt.restore(**{key: net})
    net.eval()
    return cfg, env, net


def greedy_actions(q: torch.nn.Module, device: str) -> Callable[[np.ndarray], np.ndarray]:
    """The greedy policy of the Q-network ``q`` (on ``device``, in eval mode: noisy layers use
    their means): ``act(obs [B, ...]) -> argmax_a Q(obs, a) [B]``."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return q(torch.as_tensor(np.asarray(obs), device=device)).argmax(1).cpu().numpy()

    return act


@dataclass(frozen=True)
class EvalConfig:
    """Play a trained agent from a run directory's newest checkpoint (any algorithm with a
    registered policy loader): full games (episodic_life off, unclipped scores), greedy,
    epsilon-greedy or (policy-gradient runs) sampled; print the mean and std of the scores;
    optionally record an mp4."""

    run_dir: tyro.conf.Positional[str]
    """The run directory (holds config.json and checkpoints/)."""
    episodes: int = 10
    """Full games to play (episodic_life off, real unclipped scores)."""
    epsilon: float = 0.0
    """Probability of a random action per step (0: greedy; 0.01 is a common Atari choice)."""
    sample: bool = False
    """Draw each action from the policy's distribution, as PPO acts in training, instead of
    its argmax (policy-gradient runs: ppo, ppo-lstm). The training curve's scores are the
    sampled policy's; the greedy one may score more."""
    seed: int = 10_000
    """Episode i is reset with seed + i (kept away from training seeds); also seeds --sample's
    draws."""
    video: str | None = None
    """Write an mp4 of the first video_episodes episodes here."""
    video_episodes: int = 1
    """Episodes recorded into the video."""
    video_fps: float | None = None
    """Frames per second of the video (default: real time, e.g. 15 for Atari with frame skip 4)."""
    max_steps: int | None = None
    """Cut an episode after this many agent steps (None: the env's own limit)."""
    device: str = "cpu"
    """Device the policy runs on."""
    json: str | None = None
    """Also write the scores to this JSON file."""

    def validate(self) -> None:
        if self.episodes < 1:
            raise ConfigError(f"--episodes must be >= 1, got {self.episodes}")
        if not 0.0 <= self.epsilon <= 1.0:
            raise ConfigError(f"--epsilon must be in [0, 1], got {self.epsilon}")
        if self.video_episodes < 1:
            raise ConfigError(f"--video-episodes must be >= 1, got {self.video_episodes}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"--max-steps must be >= 1 or None, got {self.max_steps}")
        if self.sample and self.epsilon > 0:
            raise ConfigError(
                "--sample draws actions from the policy and --epsilon mixes random actions into "
                "its greedy ones: pass one of them"
            )


def _run_algo(run_dir: Path, ckpt) -> tuple[str, dict[str, Any]]:
    """The run's algorithm and config (config.json, else the one saved in the checkpoint),
    with a clear error when the checkpoint was written by another algorithm than the run's."""
    from rapidrl.train.run import read_config_json

    cfg_path = run_dir / "config.json"
    config = None
    if cfg_path.exists():
        config = read_config_json(
            cfg_path,
            fix="repair it, or delete it: rapidrl eval then uses the config saved in the "
            "checkpoint",
        )
    config = config if config is not None else ckpt.config
    if config is None:
        raise ConfigError(f"{run_dir} has no config.json and its checkpoint holds no config")
    algo = config.get("algo") or ckpt.algo
    if ckpt.algo and algo != ckpt.algo:
        # Checked here, before any loader looks for its weights (a bare KeyError: 'q').
        raise ConfigError(
            f"checkpoint {ckpt.path} was written by a {ckpt.algo!r} run, but {cfg_path} "
            f"describes a {algo!r} run: the checkpoint does not belong to this run. Evaluate the "
            f"run directory that wrote it, or put this run's own checkpoints back in "
            f"{ckpt.path.parent}"
        )
    return algo, config


def _config_drift(ckpt, config: dict[str, Any]) -> str:
    """How the run's config.json differs from the config saved in ``ckpt`` (fields that change
    what a checkpoint means), as text for an error; "" when they agree or one is absent."""
    from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS
    from rapidrl.train.run import config_diff

    if not isinstance(ckpt.config, dict):
        return ""
    diffs = config_diff(ckpt.config, config, ignore=DEFAULT_IGNORE_FIELDS)
    if not diffs:
        return ""
    shown = "; ".join(f"{k}: checkpoint {a!r}, config.json {b!r}" for k, a, b in diffs[:8])
    more = f" (and {len(diffs) - 8} more)" if len(diffs) > 8 else ""
    return (
        f". The run's config.json differs from the config saved in the checkpoint: {shown}{more}."
        " Restore config.json to the settings the run was trained with, or delete it: rapidrl "
        "eval then uses the checkpoint's own config"
    )


def evaluate(cfg: EvalConfig, *, quiet: bool = False) -> dict[str, Any]:
    """Play ``cfg.episodes`` games; return ``{"scores", "mean", "std", "lengths", ...}``.
    ``quiet``: no line per episode."""
    from rapidrl.envs import make_env, resolve_env
    from rapidrl.train import CheckpointError, load_latest

    cfg.validate()
    run_dir = Path(cfg.run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} does not exist")
    try:
        # read_only: eval is a read-only command; an unreadable newest checkpoint is skipped
        # with a warning, never renamed, and ``latest`` is left as it is.
        ckpt = load_latest(run_dir, map_location=cfg.device, read_only=True)
    except CheckpointError as exc:
        raise ConfigError(str(exc)) from exc
    algo, config = _run_algo(run_dir, ckpt)
    loader = _loader(algo)
    sampling: dict[str, Any] = {}
    if cfg.sample:
        if "sample" not in inspect.signature(loader).parameters:
            raise ConfigError(
                f"--sample draws actions from a stochastic policy; a {algo} run acts greedily "
                "on its values: drop --sample (--epsilon adds random actions instead)"
            )
        sampling = {"sample": True, "seed": cfg.seed}
    try:
        act, env_id, options = loader(
            {k: v for k, v in config.items()}, ckpt, device=cfg.device, **sampling
        )
    except CheckpointError as exc:  # the weights do not fit the network this config builds
        raise ConfigError(f"{exc}{_config_drift(ckpt, config)}") from exc

    info = resolve_env(env_id)
    options = dict(options)
    if info.is_atari:
        options.update(episodic_life=False, clip_rewards=False)
    if cfg.video:
        options["render_mode"] = "rgb_array"
    env = make_env(env_id, **options)
    continuous = not hasattr(env.action_space, "n")  # a Box: the policy's actions as they are
    if continuous and cfg.epsilon > 0:
        env.close()
        raise ConfigError(
            f"--epsilon mixes in random discrete actions; {env_id} has continuous actions: drop "
            "--epsilon (--sample draws them from the Gaussian policy)"
        )
    n_actions = None if continuous else int(env.action_space.n)
    if cfg.video:
        _check_render(env, env_id)
    rng = np.random.default_rng(cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch-1 acting: more threads only add contention
    fps = cfg.video_fps
    if fps is None:
        base = (env.metadata or {}).get("render_fps") or 30
        fps = base / options.get("frame_skip", 4) if info.is_atari else base
    writer = None
    scores, lengths = [], []
    t0 = time.monotonic()
    try:
        for ep in range(cfg.episodes):
            obs, _ = env.reset(seed=cfg.seed + ep)
            reset_state = getattr(act, "reset", None)
            if reset_state is not None:  # recurrent policies: a new episode starts from zeros
                reset_state()
            record = cfg.video is not None and ep < cfg.video_episodes
            score, steps, done = 0.0, 0, False
            while not done:
                if record:
                    writer = _write_frame(writer, env.render(), cfg.video, fps)
                if rng.random() < cfg.epsilon:
                    action = int(rng.integers(n_actions))
                else:
                    action = act(np.asarray(obs)[None])[0]
                    action = action if continuous else int(action)
                obs, reward, terminated, truncated, _ = env.step(action)
                score += float(reward)
                steps += 1
                done = terminated or truncated
                if cfg.max_steps is not None and steps >= cfg.max_steps:
                    done = True
            if record:
                writer = _write_frame(writer, env.render(), cfg.video, fps)
            scores.append(score)
            lengths.append(steps)
            if not quiet:
                print(f"episode {ep + 1}/{cfg.episodes}: score {score:g} ({steps} steps)")
    finally:
        torch.set_num_threads(threads)
        env.close()
        if writer is not None:
            writer.release()
    result = {
        "run_dir": str(run_dir),
        "algo": algo,
        "env": env_id,
        "checkpoint": ckpt.path.name,
        "frames": ckpt.frames,
        "episodes": cfg.episodes,
        "epsilon": cfg.epsilon,
        "sample": cfg.sample,
        "scores": scores,
        "lengths": lengths,
        "mean": float(np.mean(scores)),
        "std": float(np.std(scores)),
        "min": float(np.min(scores)),
        "max": float(np.max(scores)),
        "seconds": time.monotonic() - t0,
        "video": cfg.video,
    }
    if cfg.json:
        atomic_write_text(cfg.json, json.dumps(result, indent=2) + "\n", "the eval's scores")
    return result


EVAL_JSON = "eval.json"
"""The file in a run directory that holds the final eval of ``--eval-episodes``."""


def final_eval(summary: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """``--eval-episodes N`` at the end of a training run (every trainer's ``train`` calls it
    on the summary it returns): when the run stopped on its own (solved, max_frames,
    max_minutes; not Ctrl-C or an ``on_log`` stop), play N full episodes of its final
    checkpoint greedily, as ``rapidrl eval RUN --episodes N`` does (on the CPU: batch-1 acting),
    write the scores to ``eval.json`` and ``eval_mean``, ``eval_std``, ``eval_episodes`` into
    ``summary.json``; return the summary with them. The run dir's lock is held again for these
    writes (the run released it when it finished). N = 0: the summary as it is. An eval that
    fails is a warning, and the summary is returned as it was: the trained run is whole."""
    from rapidrl.train.lock import RunLock
    from rapidrl.train.run import RunDir
    from rapidrl.train.track import send_after_end

    episodes = cfg.eval_episodes  # every trainer config has it (TrainerConfig)
    if not episodes or summary.get("stop_reason") in ("interrupted", "callback"):
        return summary
    run_dir = Path(summary["run_dir"])
    with RunLock(run_dir):
        try:
            r = evaluate(
                EvalConfig(str(run_dir), episodes=episodes, json=str(run_dir / EVAL_JSON)),
                quiet=True,
            )
        except Exception as exc:  # noqa: BLE001 - the trained run is whole: never lose it here
            warnings.warn(
                f"the final eval of {run_dir} failed ({type(exc).__name__}: {exc}); the run "
                f"itself is whole: `rapidrl eval {run_dir} --episodes {episodes}` plays it "
                "again",
                stacklevel=2,
            )
            return summary
        scores = {"eval_mean": r["mean"], "eval_std": r["std"], "eval_episodes": episodes}
        summary = {**summary, **scores}
        atomic_write_text(
            RunDir(run_dir).summary_json, json.dumps(summary, indent=2) + "\n", "the run summary"
        )
        try:  # --track wandb: the W&B run ended with the training; its summary gets these too
            send_after_end(cfg, run_dir, scores)
        except Exception as exc:  # noqa: BLE001 - summary.json and eval.json hold the scores
            warnings.warn(
                f"W&B did not get the final eval ({type(exc).__name__}: {exc}); "
                f"{RunDir(run_dir).summary_json} and {run_dir / EVAL_JSON} hold it",
                stacklevel=2,
            )
    print(
        f"eval: mean score {r['mean']:.2f} +- {r['std']:.2f} over {episodes} episodes of the "
        f"final policy, greedy ({r['seconds']:.0f} s); {run_dir / EVAL_JSON}",
        file=sys.stderr,
    )
    return summary


def _check_render(env: Any, env_id: str) -> None:
    """Render one frame before any episode: an env that cannot render here (MuJoCo without an
    OpenGL library) is a ConfigError naming the fix, not a traceback from deep in its renderer
    after the first episode started. The env is closed on the way out."""
    try:
        env.reset(seed=0)  # every episode resets with its own seed afterwards
        env.render()
    except Exception as exc:  # noqa: BLE001 - any renderer failure: the message says why
        try:
            why = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001 - some GL errors cannot print themselves
            why = type(exc).__name__
        try:
            env.close()
        except Exception:  # noqa: BLE001 - a renderer that failed to start may fail to close
            pass
        hint = "drop --video"
        if "mujoco" in type(env.unwrapped).__module__:
            hint = (
                "MuJoCo renders offscreen through EGL (a GPU driver's libEGL; MUJOCO_GL=egl) or "
                "OSMesa (apt install libosmesa6; MUJOCO_GL=osmesa): install one and set "
                "MUJOCO_GL, or drop --video"
            )
        raise ConfigError(
            f"--video: {env_id} cannot render on this machine ({why}); {hint}"
        ) from exc


def _write_frame(writer, frame: np.ndarray | None, path: str, fps: float):
    import cv2

    if frame is None:
        raise RuntimeError("the env returned no frame from render(); it needs rgb_array mode")
    frame = np.asarray(frame, dtype=np.uint8)
    if writer is None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        h, w = frame.shape[:2]
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        if not writer.isOpened():
            raise RuntimeError(f"cv2.VideoWriter could not open {path} for mp4v video")
    writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    return writer


def main(argv: Sequence[str]) -> int:
    """``rapidrl eval RUN_DIR [--episodes 10] [--video out.mp4] [--epsilon 0.01 | --sample]``"""
    cfg = tyro.cli(EvalConfig, args=list(argv), prog="rapidrl eval")
    cfg.validate()
    r = evaluate(cfg)
    std = 0.0 if math.isnan(r["std"]) else r["std"]
    print(
        f"{r['algo']} {r['env']} ({r['checkpoint']}, {r['frames']:,} frames): "
        f"mean score {r['mean']:.2f} +- {std:.2f} over {r['episodes']} episodes "
        + ("(actions sampled from the policy) " if r["sample"] else "")
        + f"(min {r['min']:g}, max {r['max']:g})"
        + (f"; video {r['video']}" if r["video"] else ""),
        file=sys.stdout,
    )
    return 0
