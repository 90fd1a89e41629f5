"""Native C++ vectorizers: Atari through ``ale`` (``ale_py.AtariVectorEnv``) and ``envpool``,
and Gymnasium's MuJoCo tasks through ``envpool``.

For Atari both read the same options as ``rapidrl.envs.make_env`` (``AtariOptions``); all follow
the vector API of :mod:`rapidrl.vector.api`: same-step autoreset, ``final_obs``, real unclipped
episode statistics. Each runs as one or more *groups* (:mod:`rapidrl.vector.group`) under the shared
bookkeeping of :class:`~rapidrl.vector.batched.BatchedVectorEnv`.

How the protocol is mapped, and where it differs from ``make_env`` (read before comparing scores):

- Rewards and scores: the native env runs with reward clipping *off*; the group sums the raw
  rewards into the episode return (the real score) and clips to ``sign(r)`` itself when
  ``clip_rewards`` is on.
- ``ale``: ``autoreset_mode="SameStep"`` gives ``final_obs`` natively. Its own ``episodic_life``
  restarts the whole game at every life loss, so it is not used: the group reads ``lives`` and
  reports a life loss as ``terminated`` while the game goes on (ALE's ``life_loss_info``
  semantics). Unlike ``make_env``: no no-op step and no FIRE press after a life loss, FIRE reset
  presses FIRE once (not FIRE then action 2) and replaces one of the reset no-ops, and a reset
  observation stacks zeros under the first frame (``make_env`` repeats the first frame). The
  frame limit counts agent steps (``max_episode_frames / frame_skip``), not the reset no-ops.
  A real episode end is game over or the frame limit (the native autoreset).
- ``envpool``: its autoreset is next-step (the step after a done returns the reset observation
  and ignores the action). The group adapts it: it runs envpool asynchronously with
  ``batch_size=1`` internally and, as soon as an env reports a done, sends it a dummy action so
  envpool resets it *within the same step*; the step returns the reset observation and
  ``final_obs`` holds the last one. ``episodic_life`` is envpool's own (after a life loss it plays
  random no-ops and FIRE, not one no-op step); a real end is ``info["terminated"]`` (game over) or
  the step limit. envpool counts the limit in agent steps: ``max_episode_frames // frame_skip``.
  A reset observation repeats the first frame, as ``make_env``. ``noop_max=0`` is refused.
  Seeds are fixed when an envpool is built, so ``reset(seed=s)`` with a new seed rebuilds it.
- ``batch_size < num_envs``: ``num_envs / batch_size`` native vectorizers, each a group of
  ``batch_size`` envs with its own threads, stepped round robin; ``recv`` returns the group sent
  first (FIFO). ale's own async mode cannot serve this API: its ``send`` takes actions only for
  the envs of its latest ``recv`` and its ``reset`` returns only ``batch_size`` envs, so the
  ``reset`` -> all ``N`` observations -> ``send`` to any ready env contract is not expressible.
- Only grey frames (``grayscale=True``); observations are ``uint8 [frame_stack, H, W]``.
- MuJoCo (``envpool`` only; ``Hopper-v5``, ``HalfCheetah-v5``, ``Walker2d-v5``, ``Ant-v5``,
  ``Humanoid-v5``, ... : the ids both Gymnasium and envpool register): the same same-step
  adaptation, rewards and returns as the env gives them, ``max_episode_steps`` (default the
  task's 1000) as truncation (a fall on the limit's very step is only ``truncated`` there,
  where Gymnasium says both: envpool keeps no other trace of it, its discount is 0 at every
  end), constructor options such as ``reset_noise_scale`` passed on to
  envpool's own config. The spaces are Gymnasium's (``float64`` observations, ``float32``
  actions, sent to envpool as ``float64``). Against ``gymnasium.make`` with the same initial
  state (``reset_noise_scale=0``) and the same ``float32`` actions, Hopper, Walker2d and Ant step
  to the same observations (within 1e-13 over an episode; rewards within float32 rounding);
  HalfCheetah agrees for ~100 steps and then drifts apart (chaotic dynamics and a different
  rounding); Humanoid-v5's observations differ from step ~10 by up to ~0.02 (rewards within
  2e-5). The initial-state noise comes from envpool's generator, not Gymnasium's, so the same
  seed gives other episodes than the process backends.
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np

from rapidrl.vector.api import LayoutError
from rapidrl.vector.batched import BatchedVectorEnv, LocalWorker
from rapidrl.vector.step_arrays import StepArrays

_NO_LIMIT = 2_000_000_000  # "no frame limit" for the native envs


def atari_options(env_id: str, options: dict[str, Any] | None, backend: str):
    """``(rom name, AtariOptions)`` for a native backend, with a clear error where it cannot
    honour an option."""
    from rapidrl.envs import AtariOptions, resolve_env

    info = resolve_env(env_id)
    if not info.is_atari:
        raise LayoutError(
            f"backend {backend!r} runs Atari games only, {env_id!r} is not one; "
            "use serial/subprocess/hybrid/async"
        )
    opts = AtariOptions.from_kwargs(**(options or {}))
    unsupported = []
    if not opts.grayscale:
        unsupported.append("grayscale=False")
    if opts.render_mode is not None:
        unsupported.append(f"render_mode={opts.render_mode!r}")
    if backend == "envpool" and not opts.max_pool:
        unsupported.append("max_pool=False")
    if backend == "envpool" and opts.noop_max == 0:
        unsupported.append("noop_max=0 (envpool 1.2 crashes on it; noop_max=1 is the closest)")
    if unsupported:
        raise LayoutError(
            f"backend {backend!r} does not support {', '.join(unsupported)}; "
            "use a process backend (hybrid/async), which runs make_env itself"
        )
    return info.game, opts


class _GroupBase:
    """Episode statistics and reward clipping shared by the native groups."""

    reset_options = False  # the native envs' resets take none (refused before a reset is sent)
    per_env_seeds = True  # reset(seed=[...]) can seed each env

    def __init__(self, n: int, first_env_id: int, num_threads: int | None, clip_rewards: bool):
        self.n, self.first_env_id, self.clip_rewards = n, first_env_id, clip_rewards
        self.num_threads = num_threads or 0
        self.current = None  # errors name the whole group
        self.bufs: StepArrays | None = None
        self._ret = np.zeros(n, np.float64)
        self._len = np.zeros(n, np.int64)
        self._slot = 0
        self._stepping = False

    def attach(self, bufs: StepArrays) -> None:
        self.bufs = bufs

    def begin(self, cmd: str, *args) -> None:
        """``reset`` runs to the end here; ``step`` only sends (the C++ threads start)."""
        self._stepping = False
        if cmd == "reset":
            self.reset(*args)
        elif cmd == "step":
            self._slot = args[0]
            self.send()
            self._stepping = True
        else:
            raise ValueError(f"unknown group command {cmd!r}")

    def end(self) -> None:
        """Wait for the step in flight (the GIL is released while C++ works)."""
        if self._stepping:
            self._stepping = False
            self.collect()

    def _clear(self) -> None:
        b = self.bufs
        b.rewards[:] = 0.0
        b.terminated[:] = False
        b.truncated[:] = False
        b.episode_end[:] = False
        b.episode_return[:] = 0.0
        b.episode_length[:] = 0
        self._ret[:] = 0.0
        self._len[:] = 0

    def _clip(self, r):
        return np.sign(r) if self.clip_rewards else r


class AleGroup(_GroupBase):
    """``n`` envs in one synchronous ``ale_py.AtariVectorEnv`` (same-step autoreset)."""

    def __init__(self, game: str, n: int, first_env_id: int, opts, num_threads=None):
        super().__init__(n, first_env_id, num_threads, opts.clip_rewards)
        self.game, self.opts = game, opts
        self.native = None

    def build(self) -> None:
        from ale_py import AtariVectorEnv

        o = self.opts
        h, w = o.screen_hw
        self.native = AtariVectorEnv(
            self.game,
            self.n,
            batch_size=0,
            num_threads=self.num_threads,
            autoreset_mode="SameStep",
            max_num_frames_per_episode=o.max_episode_frames or _NO_LIMIT,
            repeat_action_probability=float(o.repeat_action_probability),
            full_action_space=o.full_action_space,
            img_height=h,
            img_width=w,
            grayscale=True,
            stack_num=o.frame_stack,
            frameskip=o.frame_skip,
            maxpool=o.max_pool,
            noop_max=o.noop_max,
            episodic_life=False,  # native: restarts the game at a life loss; done here instead
            life_loss_info=False,
            reward_clipping=False,  # clipped here, so the real score can be summed
            use_fire_reset=o.fire_reset,
        )
        self.single_observation_space = self.native.single_observation_space
        self.single_action_space = self.native.single_action_space
        self._lives = np.zeros(self.n, np.int64)

    def reset(self, seed: int | list[int | None] | None, slot: int) -> None:
        if isinstance(seed, list):  # this group's seeds; -1: ale's "unseeded"
            native_seed = np.array([-1 if s is None else s for s in seed], np.int64)
        else:
            native_seed = None if seed is None else seed + self.first_env_id
        obs, info = self.native.reset(seed=native_seed)
        order = np.argsort(info["env_id"])
        self.bufs.obs[slot] = obs[order]
        self._lives[:] = info["lives"][order]
        self._clear()

    def send(self) -> None:
        self.native.send(self.bufs.actions)

    def collect(self) -> None:
        obs, reward, term, trunc, info = self.native.recv()
        ids = info["env_id"]
        if (np.diff(ids) < 0).any():  # synchronous mode answers in send order; be sure
            order = np.argsort(ids)
            obs, reward, term, trunc = obs[order], reward[order], term[order], trunc[order]
            info = {k: v[order] for k, v in info.items()}
        b = self.bufs
        reward = reward.astype(np.float64)
        self._ret += reward
        self._len += 1
        real_end = term | trunc  # native autoreset: game over or frame limit
        lives = info["lives"]
        life_lost = (
            ~real_end & (lives < self._lives) if self.opts.episodic_life else np.zeros_like(term)
        )
        b.rewards[:] = self._clip(reward)
        b.terminated[:] = term | life_lost
        b.truncated[:] = trunc
        b.episode_end[:] = real_end
        b.episode_return[:] = np.where(real_end, self._ret, 0.0)
        b.episode_length[:] = np.where(real_end, self._len, 0)
        if real_end.any():
            b.final_obs[real_end] = info["final_obs"][real_end]
            self._ret[real_end] = 0.0
            self._len[real_end] = 0
        if life_lost.any():  # the game goes on: the next "episode" starts from this frame
            b.final_obs[life_lost] = obs[life_lost]
        b.obs[self._slot] = obs
        self._lives[:] = lives

    def close(self) -> None:
        native, self.native = self.native, None
        if native is not None:
            native.close()


class _EnvpoolGroup(_GroupBase):
    """``n`` envs in one envpool run asynchronously one env at a time, adapted to same-step
    autoreset (see the module docstring). Subclasses build the pool (:meth:`_make_pool`)."""

    per_env_seeds = False  # envpool seeds env i with seed + i when the pool is built
    episodic_life = False  # Atari's life-loss "episodes": a real end is game over

    def __init__(self, n: int, first_env_id: int, num_threads, seed, clip_rewards: bool):
        super().__init__(n, first_env_id, num_threads, clip_rewards)
        self.pool = None
        self._pool_seed = (
            seed if seed is not None else int(np.random.SeedSequence().entropy % 2**30)
        )
        self._resetting = np.zeros(n, bool)
        self._ids = np.arange(n, dtype=np.int32)
        self._one = np.zeros(1, np.int32)

    def _make_pool(self, envpool, **common):
        """The envpool (``envpool.make(task, **common, ...)``); sets the two single spaces, the
        dtype actions are sent in and the action that resets a done env."""
        raise NotImplementedError

    def build(self) -> None:
        try:
            import envpool
        except ImportError as exc:
            raise ImportError(
                "the envpool backend needs envpool: pip install -e '.[envpool]' in the rapidrl checkout"
            ) from exc
        self.pool = self._make_pool(
            envpool,
            env_type="gymnasium",
            num_envs=self.n,
            batch_size=1,  # one env per recv: lets a done env be reset within the same step
            num_threads=self.num_threads or min(self.n, _cpus()),
            seed=self._pool_seed + self.first_env_id,
        )
        self._recv = self._raw_receiver()
        self._fresh = True  # built and not reset yet: a reset with _pool_seed is reproducible

    def _raw_receiver(self):
        """``() -> (obs[1,...], reward, terminated, truncated, env_id, game_over)`` of one env
        (``game_over`` is ``terminated`` where the env reports no lives).

        Reads envpool's raw state list (skips its per-call dict/tree building, ~7% of a Pong step
        here); falls back to the public ``recv`` if that internal layout is not there.
        """
        keys = list(getattr(self.pool, "_state_keys", ()))
        over_key = "info:terminated" if "info:terminated" in keys else "done"
        need = ("obs", "reward", "done", "trunc", "info:env_id", over_key)
        if all(k in keys for k in need) and hasattr(self.pool, "_recv"):
            idx = [keys.index(k) for k in need]
            raw = self.pool._recv

            def recv():
                s = raw()
                obs, rew, done, trunc, eid, over = (s[i] for i in idx)
                return obs, rew[0], bool(done[0] and not trunc[0]), bool(trunc[0]), eid[0], over[0]

            return recv

        def recv():
            obs, rew, term, trunc, info = self.pool.recv()
            return (
                obs,
                rew[0],
                bool(term[0]),
                bool(trunc[0]),
                info["env_id"][0],
                info["terminated"][0] if "terminated" in info else term[0],
            )

        return recv

    def reset(self, seed: int | None, slot: int) -> None:
        if seed is not None and (seed != self._pool_seed or not self._fresh):
            self.close()  # envpool fixes seeds at construction: a seeded reset rebuilds it
            self._pool_seed = seed
            self.build()
        self._fresh = False
        self.pool.async_reset()
        for _ in range(self.n):
            obs, *_, i, _ = self._recv()
            self.bufs.obs[slot, i] = obs[0]
        self._resetting[:] = False
        self._clear()

    def send(self) -> None:
        self.pool.send(self.bufs.actions.astype(self._action_dtype), self._ids)

    def collect(self) -> None:
        b, obs_out, recv = self.bufs, self.bufs.obs[self._slot], self._recv
        episodic = self.episodic_life
        pending = self.n
        while pending:
            obs, reward, term, trunc, i, game_over = recv()
            if self._resetting[i]:  # the reset we asked for: the new episode's first obs
                self._resetting[i] = False
                obs_out[i] = obs[0]
                pending -= 1
                continue
            reward = float(reward)
            self._ret[i] += reward
            self._len[i] += 1
            b.rewards[i] = self._clip(reward)
            b.terminated[i], b.truncated[i] = term, trunc
            real_end = trunc or (bool(game_over) if episodic else term)
            b.episode_end[i] = real_end
            b.episode_return[i] = self._ret[i] if real_end else 0.0
            b.episode_length[i] = self._len[i] if real_end else 0
            if real_end:
                self._ret[i], self._len[i] = 0.0, 0
            if term or trunc:  # next-step autoreset -> same step: reset it now
                b.final_obs[i] = obs[0]
                self._resetting[i] = True
                self._one[0] = i
                self.pool.send(self._reset_action, self._one)
            else:
                obs_out[i] = obs[0]
                pending -= 1

    def close(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()


class EnvpoolAtariGroup(_EnvpoolGroup):
    """An Atari game in envpool (``episodic_life`` is envpool's own)."""

    def __init__(self, game: str, n: int, first_env_id: int, opts, num_threads=None, seed=None):
        super().__init__(n, first_env_id, num_threads, seed, opts.clip_rewards)
        self.task = "".join(p.capitalize() for p in game.split("_")) + "-v5"
        self.opts = opts
        self.episodic_life = opts.episodic_life

    def _make_pool(self, envpool, **common):
        o = self.opts
        h, w = o.screen_hw
        frames = o.max_episode_frames
        pool = envpool.make(
            self.task,
            **common,
            max_episode_steps=max(1, frames // o.frame_skip) if frames else _NO_LIMIT,
            stack_num=o.frame_stack,
            frame_skip=o.frame_skip,
            noop_max=o.noop_max,
            episodic_life=o.episodic_life,
            reward_clip=False,
            use_fire_reset=o.fire_reset,
            img_height=h,
            img_width=w,
            gray_scale=True,
            repeat_action_probability=float(o.repeat_action_probability),
            full_action_space=o.full_action_space,
        )
        self.single_observation_space = gym.spaces.Box(0, 255, (o.frame_stack, h, w), np.uint8)
        self.single_action_space = gym.spaces.Discrete(int(pool.action_space.n))
        self._action_dtype = np.int32
        self._reset_action = np.zeros(1, np.int32)
        return pool


class EnvpoolMujocoGroup(_EnvpoolGroup):
    """A Gymnasium MuJoCo task in envpool (module docstring: where it matches Gymnasium's)."""

    def __init__(self, task: str, n: int, first_env_id: int, config: dict, num_threads=None,
                 seed=None):  # fmt: skip
        super().__init__(n, first_env_id, num_threads, seed, clip_rewards=False)
        self.task, self.config = task, config

    def _make_pool(self, envpool, **common):
        pool = envpool.make(self.task, **common, **self.config)  # options checked before
        act = pool.action_space
        self.single_observation_space = pool.observation_space
        # Gymnasium's action space (float32), so nets and checkpoints agree across backends.
        self.single_action_space = gym.spaces.Box(
            act.low.astype(np.float32), act.high.astype(np.float32), act.shape, np.float32
        )
        self._action_dtype = act.dtype
        self._reset_action = np.zeros((1, *act.shape), act.dtype)
        return pool


def envpool_mujoco_task(env_id: str, options: dict[str, Any] | None) -> tuple[str, dict]:
    """``(task, envpool config)`` for a Gymnasium MuJoCo id that envpool hosts, with a clear
    error where it cannot run ``env_id`` or honour an option."""
    import envpool

    spec = gym.registry.get(env_id)
    entry = str(getattr(spec, "entry_point", "")) if spec is not None else ""
    if "mujoco" not in entry or env_id not in envpool.list_all_envs():
        raise LayoutError(
            f"backend 'envpool' runs Atari games and Gymnasium's MuJoCo tasks (Hopper-v5, "
            f"HalfCheetah-v5, Walker2d-v5, Ant-v5, Humanoid-v5, ...), not {env_id!r}; use "
            "serial/subprocess/hybrid/async"
        )
    config = {k: v for k, v in (options or {}).items() if k != "disable_env_checker"}
    if config.get("render_mode") is not None:
        raise LayoutError(
            f"backend 'envpool' does not render (render_mode={config['render_mode']!r}); use a "
            "process backend (hybrid/async) for video"
        )
    config.pop("render_mode", None)
    if config.get("max_episode_steps") is None:
        config.pop("max_episode_steps", None)  # the task's own (1000), as gymnasium.make
    try:
        envpool.make_spec(env_id, **config)  # before any group is built: the error as it is
    except TypeError as exc:  # an option envpool's config does not have
        raise LayoutError(
            f"envpool's {env_id} does not take the options {sorted(config)} ({exc}); use a "
            "process backend (hybrid/async), which runs gymnasium.make itself"
        ) from exc
    return env_id, config


def _cpus() -> int:
    from rapidrl import hardware

    return hardware.cpu_count()


def _make_native(
    name: str,
    make_group,
    num_envs: int,
    batch_size: int | None,
    seed: int | None,
    copy: bool,
) -> BatchedVectorEnv:
    b = num_envs if batch_size is None else int(batch_size)
    if not 1 <= b <= num_envs or num_envs % b:
        raise LayoutError(
            f"the {name} backend needs num_envs ({num_envs}) to be a multiple of batch_size "
            f"({b}): batch_size < num_envs runs num_envs / batch_size native vectorizers"
        )
    workers: list[LocalWorker] = []
    try:
        for k in range(num_envs // b):
            workers.append(LocalWorker(k, k * b, (k + 1) * b, functools.partial(make_group, k * b)))
        g = workers[0].group
        obs_space, act_space = g.single_observation_space, g.single_action_space
        bufs = StepArrays.allocate(StepArrays.specs(obs_space, act_space, num_envs))
        for w in workers:
            w.attach(bufs)
        return BatchedVectorEnv(
            workers,
            bufs,
            obs_space,
            act_space,
            batch_size=b,
            copy=copy,
            seed=seed,
            name=f"{name} vector env",
        )
    except BaseException:
        for w in workers:
            w.close()
        raise


def make_ale_vec(
    env_id: str,
    num_envs: int,
    *,
    batch_size: int | None = None,
    num_threads: int | None = None,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    copy: bool = True,
) -> BatchedVectorEnv:
    game, opts = atari_options(env_id, options, "ale")
    b = num_envs if batch_size is None else batch_size

    def make_group(first: int) -> AleGroup:
        return AleGroup(game, b, first, opts, num_threads)

    return _make_native("ale", make_group, num_envs, batch_size, seed, copy)


def make_envpool_vec(
    env_id: str,
    num_envs: int,
    *,
    batch_size: int | None = None,
    num_threads: int | None = None,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    copy: bool = True,
) -> BatchedVectorEnv:
    """An Atari game or a Gymnasium MuJoCo task in envpool (see the module docstring)."""
    from rapidrl.envs import resolve_env

    try:
        import envpool  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "the envpool backend needs envpool: pip install -e '.[envpool]' in the rapidrl checkout"
        ) from exc
    b = num_envs if batch_size is None else batch_size
    if resolve_env(env_id).is_atari:
        game, opts = atari_options(env_id, options, "envpool")

        def make_group(first: int) -> _EnvpoolGroup:
            return EnvpoolAtariGroup(game, b, first, opts, num_threads, seed)

    else:
        task, config = envpool_mujoco_task(env_id, options)

        def make_group(first: int) -> _EnvpoolGroup:
            return EnvpoolMujocoGroup(task, b, first, config, num_threads, seed)

    return _make_native("envpool", make_group, num_envs, batch_size, seed, copy)
