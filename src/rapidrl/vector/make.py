"""``make_vec``: the one factory of every vector-env backend (see :mod:`rapidrl.vector` for the
backends), the ``auto`` layout (the autotuned one, else :func:`default_layout`) and the env
factories the worker processes build their envs with (:class:`EnvFromId`)."""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from rapidrl import hardware
from rapidrl.vector.api import LayoutError, VectorEnv

__all__ = ["BACKENDS", "DEFAULT_SPIN", "EnvFromId", "default_layout", "make_vec"]

BACKENDS = ("serial", "subprocess", "hybrid", "async", "ale", "envpool", "auto")
_PROCESS_BACKENDS = ("subprocess", "hybrid", "async", "auto")  # auto may pick processes
log = logging.getLogger("rapidrl.vector")


class EnvFromId:
    """Picklable factory: ``rapidrl.envs.make_env(env_id, **options)`` (imported in the worker)."""

    def __init__(self, env_id: str, options: dict[str, Any] | None = None):
        self.env_id, self.options = env_id, dict(options or {})

    def __call__(self):
        try:
            from rapidrl.envs import make_env
        except ImportError as exc:  # the envs package is not there (yet)
            raise ImportError(
                f"building {self.env_id!r} needs rapidrl.envs.make_env, which is not "
                "available; pass a list of env factories instead"
            ) from exc
        return make_env(self.env_id, **self.options)

    def __repr__(self) -> str:
        return f"EnvFromId({self.env_id!r}, {self.options!r})"


def _default_workers(num_envs: int, equal: bool) -> int:
    """min(num_envs, cpus) workers; the largest such divisor of num_envs if groups must be equal."""
    p = max(1, min(num_envs, hardware.cpu_count()))
    if equal:
        while num_envs % p:
            p -= 1
    return p


def make_vec(
    env: str | Callable | Sequence[Callable],
    num_envs: int,
    backend: str = "serial",
    *,
    num_workers: int | None = None,
    batch_size: int | None = None,
    seed: int | None = None,
    env_options: dict[str, Any] | None = None,
    step_timeout: float = 60.0,
    restart_on_crash: bool = False,
    context: str = "spawn",
    copy: bool = True,
    inline: bool = False,
    spin: float = 0.0,
) -> VectorEnv:
    """Build ``num_envs`` envs behind the vector API with the given backend.

    Args:
        env: an env id (built with ``rapidrl.envs.make_env(env, **env_options)``, in the workers
            for process backends), one factory (called ``num_envs`` times) or a list of
            ``num_envs`` factories (callables returning a gymnasium env; shipped to workers with
            cloudpickle).
        num_envs: number of envs ``N``.
        backend: ``serial``, ``subprocess``, ``hybrid``, ``async``, ``ale``, ``envpool`` or
            ``auto`` (see the module docstring). ``auto`` with any of ``num_workers``,
            ``batch_size``, ``inline``, ``spin`` given takes that layout, on ``async`` when
            ``batch_size < N`` and ``hybrid`` otherwise, not an autotuned one.
        num_workers: worker processes (``hybrid``/``async``; default ``min(N, cpus)``, for
            ``async`` the largest divisor of ``N`` up to that); threads for ``ale``/``envpool``
            (default: theirs).
        batch_size: envs returned per ``recv`` (default ``N``: synchronous). Smaller gives
            first-ready batches; with processes it must be a multiple of the envs per worker.
            ``async`` defaults to about half the workers' envs.
        seed: seed of the first ``reset()`` that passes none (env ``i`` gets ``seed + i``).
        env_options: options for ``make_env`` (and the Atari options of ``ale``/``envpool``).
        step_timeout: seconds a worker may take for one command before it counts as dead.
        restart_on_crash: restart a crashed, killed or stuck worker instead of raising: its envs
            report that step as ``truncated`` with ``infos["worker_restarted"]``.
        context: multiprocessing start method for process backends.
        copy: return fresh arrays (default); ``False`` may return views of internal buffers that
            the following steps overwrite.
        inline: ``hybrid``/``async`` only: of the ``num_workers`` groups, the last one runs in
            this process, stepped inside ``send()`` after the worker processes got their
            actions (no pipe, no process; it cannot be timed out, like ``serial``).
        spin: process backends: seconds that a worker waiting for its next command, and the
            caller waiting for results, poll before they block. A busy core answers far sooner
            than one that went idle, at the price of that much CPU per wait: worth it with no
            more processes than cores (``rapidrl bench envs`` measures both).
    """
    if backend not in BACKENDS:
        raise LayoutError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if not isinstance(num_envs, int) or num_envs < 1:
        raise LayoutError(f"num_envs must be a positive int, got {num_envs!r}")
    if step_timeout <= 0:
        raise LayoutError(f"step_timeout must be > 0, got {step_timeout}")
    if spin < 0:
        raise LayoutError(f"spin must be >= 0 seconds, got {spin}")
    if batch_size is not None and not 1 <= batch_size <= num_envs:  # before any worker starts
        raise LayoutError(f"batch_size must be in [1, num_envs={num_envs}], got {batch_size}")
    if spin and backend not in ("subprocess", "hybrid", "async"):
        raise LayoutError(f"spin applies to the process backends, not {backend!r}")
    if inline and backend not in ("hybrid", "async"):
        raise LayoutError(
            f"inline=True applies to the hybrid and async backends, not {backend!r} (it keeps "
            "one of their env groups in this process)"
        )
    if backend in _PROCESS_BACKENDS and context != "fork":
        from rapidrl.vector.process import exit_if_reimporting_main

        exit_if_reimporting_main()  # a worker re-running an unguarded script: see process.py
    if isinstance(env, str):
        _resolve_env_id(env)  # an unknown id is the registry's error, before any worker starts
    if backend == "auto" and (num_workers is not None or batch_size is not None or inline or spin):
        # The caller set (part of) the layout: honour it rather than an autotuned one, on the
        # backend that takes it (first-ready batches: async; else hybrid).
        backend = "async" if batch_size not in (None, num_envs) else "hybrid"
        log.info(
            "backend='auto' with a layout given (num_workers=%s, batch_size=%s, inline=%s, "
            "spin=%s): using backend=%r",
            num_workers, batch_size, inline, spin, backend,
        )  # fmt: skip
    if backend == "auto":
        return _make_auto(
            env,
            num_envs,
            seed=seed,
            env_options=env_options,
            step_timeout=step_timeout,
            restart_on_crash=restart_on_crash,
            context=context,
            copy=copy,
        )
    if backend in ("ale", "envpool"):
        if not isinstance(env, str):
            raise LayoutError(f"backend {backend!r} needs an env id string, got {env!r}")
        from rapidrl.vector import native

        if restart_on_crash:
            log.info("restart_on_crash has no effect on the in-process %s backend", backend)
        build = native.make_ale_vec if backend == "ale" else native.make_envpool_vec
        return build(
            env,
            num_envs,
            batch_size=batch_size,
            num_threads=num_workers,
            seed=seed,
            options=env_options,
            copy=copy,
        )

    env_fns = _env_fns(env, num_envs, env_options)
    if backend == "serial":
        if num_workers not in (None, 1):
            raise LayoutError("the serial backend has no workers; use backend='hybrid'")
        if batch_size not in (None, num_envs):
            raise LayoutError(
                "the serial backend is synchronous (batch_size == num_envs); for first-ready "
                "batches use backend='async'"
            )
        return _make_serial(
            env_fns, seed=seed, copy=copy, restart_on_crash=restart_on_crash, timeout=step_timeout
        )

    from rapidrl.vector.process import make_process_vec

    if backend == "subprocess":
        if num_workers not in (None, num_envs):
            raise LayoutError(
                f"subprocess runs one env per process (num_workers == num_envs == {num_envs}); "
                "for fewer processes use backend='hybrid'"
            )
        num_workers = num_envs
    elif num_workers is None:
        first_ready = batch_size is not None and batch_size < num_envs
        num_workers = _default_workers(num_envs, equal=backend == "async" or first_ready)
    if backend == "async" and batch_size is None:
        per_worker = num_envs // num_workers
        batch_size = per_worker * max(1, num_workers // 2)
    if inline and num_workers < 2:
        raise LayoutError(
            f"inline=True needs num_workers >= 2 (got {num_workers}): one group stays in this "
            "process and at least one runs in a worker process; for none use backend='serial'"
        )
    return make_process_vec(
        env_fns,
        num_workers,
        inline=inline,
        spin=spin,
        batch_size=batch_size,
        copy=copy,
        step_timeout=step_timeout,
        restart_on_crash=restart_on_crash,
        context=context,
        seed=seed,
        name=f"{backend} vector env",
    )


def _resolve_env_id(env_id: str) -> None:
    """Raise ``rapidrl.envs.UnknownEnvError`` (with close matches, as the CLI says it) for an id
    the registry does not know; otherwise every worker would raise it in its own traceback."""
    try:
        from rapidrl.envs import resolve_env
    except ImportError:  # the envs package is not there: EnvFromId explains it when called
        return
    resolve_env(env_id)


def _env_fns(env, num_envs: int, env_options) -> list[Callable]:
    if isinstance(env, str):
        return [EnvFromId(env, env_options) for _ in range(num_envs)]
    if env_options:
        raise LayoutError("env_options only apply to an env id; bind them into your factories")
    if isinstance(env, gym.Env):
        raise TypeError(
            "make_vec needs env factories (e.g. lambda: MyEnv()), not an env instance: each "
            "env must be built where it runs"
        )
    if callable(env):
        return [env] * num_envs
    fns = list(env)
    if len(fns) != num_envs:
        raise LayoutError(f"got {len(fns)} env factories for num_envs={num_envs}")
    for f in fns:
        if not callable(f):
            raise TypeError(f"env factories must be callables returning an env, got {f!r}")
    return fns


def _make_serial(env_fns, *, seed, copy, restart_on_crash, timeout):
    from rapidrl.vector.batched import BatchedVectorEnv, LocalWorker
    from rapidrl.vector.group import EnvGroup
    from rapidrl.vector.step_arrays import StepArrays

    worker = LocalWorker(0, 0, len(env_fns), functools.partial(EnvGroup, env_fns, 0))
    try:
        g = worker.group
        specs = StepArrays.specs(g.single_observation_space, g.single_action_space, len(env_fns))
        bufs = StepArrays.allocate(specs)
        worker.attach(bufs)
        return BatchedVectorEnv(
            [worker],
            bufs,
            g.single_observation_space,
            g.single_action_space,
            copy=copy,
            seed=seed,
            restart_on_crash=restart_on_crash,
            step_timeout=timeout,
            name="serial vector env",
        )
    except BaseException:
        worker.close()
        raise


def _make_auto(env, num_envs: int, **kwargs) -> VectorEnv:
    from rapidrl.envs.errors import InvalidOptionError, UnknownEnvError
    from rapidrl.vector.autotune_cache import canonical_env_id, load_autotune

    choice = None
    if isinstance(env, str):
        choice = load_autotune(canonical_env_id(env), num_envs)
    if choice is not None:
        try:
            layout = _autotune_layout(choice)
            return make_vec(env, num_envs, layout.pop("backend"), **layout, **kwargs)
        except (UnknownEnvError, InvalidOptionError):
            raise  # the env id or options are wrong in any layout: not the entry's fault
        except (ValueError, TypeError, ImportError) as exc:
            # A stale entry (envpool measured, since uninstalled; another rapidrl's layout rules)
            # or a hand-edited one must not fail the run: the default layout still works.
            # Errors of the envs themselves are EnvWorkerErrors and pass through.
            warnings.warn(
                f"autotune entry {choice} for {env!r} with num_envs={num_envs} is unusable here "
                f"({type(exc).__name__}: {exc}); using the default layout "
                f"{default_layout(num_envs)} (`rapidrl bench envs --autotune` measures a new "
                "entry)",
                RuntimeWarning,
                stacklevel=3,
            )
    layout = default_layout(num_envs)
    if choice is None:
        log.info(
            "backend='auto': no autotune entry for %s with num_envs=%d on this machine "
            "(`rapidrl bench envs --autotune` measures one); using the default layout %s",
            env if isinstance(env, str) else "these env factories",
            num_envs,
            layout,
        )
    return make_vec(env, num_envs, "hybrid", **layout, **kwargs)


def _autotune_layout(choice: dict[str, Any]) -> dict[str, Any]:
    """``make_vec`` arguments of an autotune entry, with the types checked (a hand-edited value
    would otherwise fail deep inside); ``make_vec`` checks that the layout fits."""
    backend = choice.get("backend")
    if backend not in BACKENDS or backend == "auto":
        raise ValueError(f"unknown backend {backend!r}")
    workers, batch = choice.get("num_workers") or None, choice.get("batch_size")
    for name, value in (("num_workers", workers), ("batch_size", batch)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"{name} must be an int or null, got {value!r}")
    spin, inline = choice.get("spin") or 0.0, choice.get("inline", False)
    if not isinstance(spin, (int, float)) or isinstance(spin, bool):
        raise TypeError(f"spin must be a number of seconds, got {spin!r}")
    if not isinstance(inline, bool):
        raise TypeError(f"inline must be true or false, got {inline!r}")
    layout = {
        "backend": backend,
        # subprocess: one process per env, whatever was stored
        "num_workers": None if backend == "subprocess" else workers,
        "batch_size": batch,
    }
    if inline:
        layout["inline"] = True
    if spin:
        layout["spin"] = float(spin)
    return layout


DEFAULT_SPIN = 0.002
"""Seconds of polling before a blocking wait in the default layout: the autotuner's pick on the
2-core machine (inline hybrid with spin 2 ms: 3,701 steps/s on 8 Pong envs on a Zen 3 EPYC
against 2,373 for plain hybrid processes, README)."""


def default_layout(num_envs: int) -> dict[str, Any]:
    """The layout ``backend='auto'`` takes when nothing was autotuned: ``hybrid`` with one env
    group per core, the last group stepped in this process (``inline``), and a short ``spin``:
    the best layout the autotuner found on 2 cores at 8 and 16 envs. One env or one core: the
    envs in this process (one group, inline needs two)."""
    workers = _default_workers(num_envs, equal=False)
    if workers < 2:
        return {"num_workers": 1}
    return {"num_workers": workers, "inline": True, "spin": DEFAULT_SPIN}
