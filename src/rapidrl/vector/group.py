"""The per-group stepping code, written once: serial runs one group in-process on plain arrays,
every process worker runs the same class on its rows of the shared-memory arrays.

A *group* owns ``M`` envs and writes step results into given :class:`StepArrays` rows. It applies the
same-step autoreset rule of :mod:`rapidrl.vector.api` and the episode statistics. Native
vectorizers (``ale``, ``envpool``; :mod:`rapidrl.vector.native`) are groups too: they implement the
same two calls, ``begin`` (start a ``reset``/``step``) and ``end`` (finish it), so the parent-side
bookkeeping in :mod:`rapidrl.vector.batched` is shared by every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np

from rapidrl.vector.step_arrays import StepArrays


def reports_episode_stats(env: gym.Env) -> bool:
    """Does ``env`` put ``info["episode"] = {"r", "l"}`` on the step a *real* episode ends?

    True when the env (or a wrapper) sets ``reports_episode_stats = True``, or when its wrapper
    chain holds gymnasium's ``RecordEpisodeStatistics`` or a rapidrl Atari env (both report). An
    env that reports is trusted for episode ends (Atari with episodic life terminates at every life
    loss but reports only at game over); an env that does not is accumulated here and ends at
    ``terminated | truncated``. An env that reports without advertising it is detected at its
    first report (a termination before that counts as an end).
    """
    try:
        if env.get_wrapper_attr("reports_episode_stats"):
            return True
    except AttributeError:
        pass
    e = env
    while True:
        if isinstance(e, gym.wrappers.RecordEpisodeStatistics):
            return True
        if type(e).__module__.startswith("rapidrl.envs.atari"):
            return True
        if not isinstance(e, gym.Wrapper):
            return False
        e = e.env


def _scalar(x) -> float:
    return np.asarray(x).reshape(-1)[0].item()


class EnvGroup:
    """``M`` gymnasium envs stepped one after the other, results written in place into ``bufs``.

    :meth:`build` makes the envs from ``env_fns``, then :meth:`attach` gives the group its rows of
    the buffers (which can only be sized once the spaces are known). Env ``j`` of the group is
    global env ``first_env_id + j`` (``reset(seed)`` seeds it with ``seed + first_env_id + j``).
    ``current`` is the local index of the env being built or called, for error reports.

    Observations are checked against the observation space before they are written: numpy would
    broadcast a ``(1,)`` observation into a ``(4,)`` row and wrap ``300.7`` into a ``uint8`` as
    ``44``, silently. Every reset's observation gets the full check; a step's costs two attribute
    comparisons (its shape, and its dtype by identity) unless something differs. A dtype that
    converts within its kind (``float64`` into a ``float32`` Box, ``int64`` into a ``float32``
    one: what many gymnasium envs return) is accepted; one that would change kind (a float into
    an integer Box, a signed into an unsigned one) is an error naming the env and the fix.
    """

    reset_options = True  # reset(options=...) reaches every env's reset
    per_env_seeds = True  # reset(seed=[...]) seeds env j with its own seed

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], first_env_id: int = 0):
        self.env_fns = list(env_fns)
        self.first_env_id = first_env_id
        self.current: int | None = None
        self.envs: list[gym.Env] = []
        self.bufs: StepArrays | None = None

    def build(self) -> None:
        """Make the envs; if a factory raises, close those made (``current`` names the culprit)."""
        try:
            for j, fn in enumerate(self.env_fns):
                self.current = j
                self.envs.append(fn())
            e0 = self.envs[0]
            for j, e in enumerate(self.envs[1:], 1):
                if e.observation_space != e0.observation_space or e.action_space != e0.action_space:
                    self.current = j
                    raise ValueError(
                        f"env {self.first_env_id + j} has spaces {e.observation_space}, "
                        f"{e.action_space}; env {self.first_env_id} has {e0.observation_space}, "
                        f"{e0.action_space}: all envs of a vector env need the same spaces"
                    )
        except BaseException:
            self.close()
            raise
        self.current = None
        self.single_observation_space = e0.observation_space
        self.single_action_space = e0.action_space
        m = len(self.envs)
        self._reports = [reports_episode_stats(e) for e in self.envs]
        # Python floats/ints, not numpy scalars: read and written per env on every step.
        self._ret = [0.0] * m
        self._len = [0] * m
        self._discrete = isinstance(e0.action_space, gym.spaces.Discrete)
        space = e0.observation_space
        self._obs_shape = tuple(space.shape) if space.shape is not None else None
        self._obs_dtype = np.dtype(space.dtype) if space.dtype is not None else None
        # The step check compares dtypes by identity first (numpy's builtin dtypes are
        # singletons), then with this: the space's dtype, or one the full check accepted since.
        self._obs_dtype_ok = self._obs_dtype
        # Envs whose own class writes observations in place (rapidrl's lean Atari env); a wrapper
        # does not count, its step() may change what the env returns.
        self._step_into = [getattr(type(e), "step_into", None) for e in self.envs]

    def attach(self, bufs: StepArrays) -> None:
        """Write results into ``bufs`` (exactly this group's rows) from now on."""
        self.bufs = bufs

    # --- the two calls every group implements ------------------------------------------------
    def begin(self, cmd: str, *args) -> None:
        if cmd == "step":
            self.step(*args)
        elif cmd == "reset":
            self.reset(*args)
        else:
            raise ValueError(f"unknown group command {cmd!r}")

    def end(self) -> None:
        """Python envs finish inside :meth:`begin`; nothing is left in flight."""

    # ------------------------------------------------------------------------------------------
    def reset(
        self, seed: int | list[int | None] | None, slot: int, options: dict | None = None
    ) -> None:
        """Reset every env: an int seeds env ``j`` with ``seed + first_env_id + j``, a list (this
        group's share of the vector env's seeds) with ``seed[j]``; ``options`` go to each."""
        b = self.bufs
        for j, env in enumerate(self.envs):
            self.current = j
            if seed is None or isinstance(seed, list):
                s = None if seed is None else seed[j]
            else:
                s = seed + self.first_env_id + j
            obs, _ = env.reset(seed=s, options=options)
            b.obs[slot, j] = self.checked_obs(j, obs, "reset")
        self.current = None
        b.rewards[:] = 0.0
        b.terminated[:] = False
        b.truncated[:] = False
        b.episode_end[:] = False
        b.episode_return[:] = 0.0
        b.episode_length[:] = 0
        m = len(self.envs)
        self._ret = [0.0] * m
        self._len = [0] * m

    def step(self, slot: int) -> None:
        b = self.bufs
        obs_out, final_out = b.obs[slot], b.final_obs
        # Python ints for Discrete (what every env accepts), a private copy for Box (an env may
        # keep a reference to its action; the shared buffer is rewritten next step).
        actions = b.actions.tolist() if self._discrete else b.actions.copy()
        ret, length, reports = self._ret, self._len, self._reports
        m = len(self.envs)
        # Per-env scalars are collected in lists and written with one array assignment each:
        # a numpy item write costs as much as a whole small-array write.
        rewards, terms, truncs = [0.0] * m, [False] * m, [False] * m
        ends, ep_ret, ep_len = [False] * m, [0.0] * m, [0] * m
        for j, env in enumerate(self.envs):
            self.current = j
            into = self._step_into[j]
            if into is not None:
                obs = obs_out[j]
                reward, terminated, truncated, info = into(env, actions[j], obs)
            else:
                obs, reward, terminated, truncated, info = env.step(actions[j])
                obs = self.fits(j, obs, "step")
            ret[j] += reward
            length[j] += 1
            ep = info.get("episode") if info else None
            if ep is not None:
                reports[j] = True
                ends[j] = True
                ep_ret[j] = _scalar(ep["r"])
                ep_len[j] = int(_scalar(ep["l"]))
            elif (terminated or truncated) and not reports[j]:
                ends[j] = True
                ep_ret[j] = ret[j]
                ep_len[j] = length[j]
            if terminated or truncated:
                ret[j] = 0.0
                length[j] = 0
                final_out[j] = obs
                obs = self.fits(j, env.reset()[0], "reset")
                obs_out[j] = obs
            elif into is None:
                obs_out[j] = obs
            rewards[j], terms[j], truncs[j] = reward, terminated, truncated
        self.current = None
        b.rewards[:] = rewards
        b.terminated[:] = terms
        b.truncated[:] = truncs
        b.episode_end[:] = ends
        b.episode_return[:] = ep_ret
        b.episode_length[:] = ep_len

    def fits(self, j: int, obs, call: str):
        """The cheap per-step check (class docstring): an array of the space's shape and an
        accepted dtype passes as it is; anything else goes through :meth:`checked_obs`. A
        non-array (no ``.shape``: a list) costs nothing until it happens."""
        try:
            if obs.shape == self._obs_shape and (
                obs.dtype is self._obs_dtype or obs.dtype == self._obs_dtype_ok
            ):
                return obs
        except AttributeError:
            pass
        return self.checked_obs(j, obs, call)

    def checked_obs(self, j: int, obs, call: str) -> np.ndarray:
        """``obs`` of env ``j`` as an array that fits the observation space, or a ValueError
        naming the env, what it returned and what the space expects."""
        space = self.single_observation_space
        arr = np.asarray(obs)
        where = f"env {self.first_env_id + j} returned an observation"
        if arr.shape != self._obs_shape:
            raise ValueError(
                f"{where} of shape {arr.shape} from {call}(), but its observation_space {space} "
                f"has shape {self._obs_shape}: return arrays of that shape (numpy would broadcast "
                "or reject this one when batching)"
            )
        if arr.dtype != self._obs_dtype:
            if not np.can_cast(arr.dtype, self._obs_dtype, "same_kind"):
                raise ValueError(
                    f"{where} of dtype {arr.dtype} from {call}(), but its observation_space "
                    f"{space} has dtype {self._obs_dtype}: converting would wrap or truncate "
                    f"values (300.7 becomes 44 in uint8); return obs.astype(np.{self._obs_dtype}) "
                    f"(clipped to the space's bounds), or declare the space with dtype {arr.dtype}"
                )
            self._obs_dtype_ok = arr.dtype  # accepted: later steps compare against it directly
        return arr

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass
        self.envs = []
