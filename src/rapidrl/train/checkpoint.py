"""Atomic checkpoints with fallback on corruption, a config-mismatch check, and a Ctrl-C helper.

Layout of ``<run_dir>/checkpoints/``::

    ckpt-000001000000.pt    torch payload (see ``Checkpointer.save``), frames zero-padded
    ckpt-000001000000.npz   optional big arrays (e.g. the replay buffer), written first
    latest                  text: the file name of the newest checkpoint (for people and tools)

Every file is written to a temp file in the same directory, fsynced and ``os.replace``-d, in the
order npz -> pt -> latest, so a crash leaves the previous checkpoint intact. Loading walks the
checkpoints newest first by frame count (it does not trust ``latest``: a crash between the pt and
the pointer loses nothing) and falls back, with a warning, past any that is truncated or
corrupt, renaming it ``*.corrupt`` so it is out of the way of the resumed run (``read_only=True``,
what ``rapidrl eval`` uses, falls back the same way but leaves every file as it is).

Payloads load with ``torch.load(weights_only=True)``: no arbitrary code runs on load, and
``save`` refuses, up front and by key, values that such a load would reject.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rapidrl.train.run import (
    atomic_write,
    atomic_write_text,
    config_diff,
    config_to_dict,
    list_checkpoints,
)
from rapidrl.train.seeding import get_rng_states, set_rng_states

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointState",
    "Checkpointer",
    "StopOnInterrupt",
    "list_checkpoints",
    "load_latest",
    "replay_refill_notice",
]

FORMAT_VERSION = 1
# What a refused load names in torch's message: "Unsupported global: GLOBAL module.Name ...".
_REFUSED_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+)")
_LIST_MAX = 8  # names listed in an error before "and N more"

# Config fields that steer a run without changing what a checkpoint means; not compared on
# resume unless a trainer names its own ``match_fields``/``ignore_fields``.
DEFAULT_IGNORE_FIELDS = (
    "run_dir",
    "resume",
    "total_frames",
    "max_frames",
    "stop_at_score",
    "no_progress",
    "progress",
    "device",
    "num_threads",
    "torch_threads",
    "checkpoint_every",
    "checkpoint_every_frames",
    "checkpoint_every_seconds",
    "keep_checkpoints",
    "log_every",
    "log_every_frames",
    "log_every_seconds",
    "track",
    "track_project",
    "track_group",
    "eval_episodes",
)


class CheckpointError(RuntimeError):
    """A checkpoint is missing, truncated or unreadable; the message names the file."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint was written by a different algorithm or a config that differs where it
    matters; ``.diffs`` holds ``(field, checkpoint_value, current_value)``."""

    def __init__(self, message: str, diffs: list[tuple[str, Any, Any]]):
        super().__init__(message)
        self.diffs = diffs


def _ckpt_name(frames: int) -> str:
    return f"ckpt-{frames:012d}.pt"


# --------------------------------------------------------------------------------------------
# Payload checks
# --------------------------------------------------------------------------------------------
_EXACT = (type(None), bool, int, float, complex, str, bytes)
_LEAVES = (torch.Tensor, torch.Size, torch.dtype, torch.device)


def _to_payload(value: Any, where: str) -> Any:
    """Call ``state_dict()`` on objects that have one, turn numpy scalars into Python scalars,
    and refuse anything ``torch.load(weights_only=True)`` would (naming the key)."""
    if hasattr(value, "state_dict") and callable(value.state_dict):
        value = value.state_dict()
    if type(value) in _EXACT or isinstance(value, _LEAVES):
        return value
    if isinstance(value, np.generic):
        return value.item()
    for base in (bool, int, float, str, bytes):  # subclasses (IntEnum, TorchVersion) -> base
        if isinstance(value, base):
            return base(value)
    if isinstance(value, Mapping):
        items = [(k, _to_payload(v, f"{where}.{k}")) for k, v in value.items()]
        return OrderedDict(items) if isinstance(value, OrderedDict) else dict(items)
    if isinstance(value, (list, tuple, set)):
        items = [_to_payload(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else type(value)(items)
    hint = (
        "convert it with torch.from_numpy, or pass big arrays through save(arrays=...)"
        if isinstance(value, np.ndarray)
        else "store plain Python values, tensors, or an object with state_dict()"
    )
    raise TypeError(
        f"checkpoint state {where} is a {type(value).__name__}, which "
        f"torch.load(weights_only=True) cannot read back; {hint}"
    )


# --------------------------------------------------------------------------------------------
# Loaded checkpoint
# --------------------------------------------------------------------------------------------
def _names(names: list[str]) -> str:
    more = len(names) - _LIST_MAX
    return ", ".join(names[:_LIST_MAX]) + (f" (and {more} more)" if more > 0 else "")


class CheckpointState(dict):
    """``Checkpoint.state``: a plain dict whose missing entry raises ``CheckpointError`` naming
    the file and what it holds, not a bare ``KeyError: 'q'`` (a checkpoint of another algorithm,
    or one written by an older trainer)."""

    def __init__(self, data: Mapping[str, Any], path: Path):
        super().__init__(data)
        self.path = path

    def __missing__(self, key: Any) -> Any:
        raise CheckpointError(
            f"{self.path} has no state {key!r}; it holds {sorted(self)}: it was written by "
            "another algorithm or rapidrl version than the one loading it; load it with the "
            "trainer that wrote it (its algo is in the run's config.json)"
        )


def _check_fits(path: Path, name: str, weights: Any, module: torch.nn.Module) -> None:
    """``CheckpointError`` listing every missing, unexpected and differently shaped entry when
    ``weights`` (the checkpoint's state ``name``) cannot load into ``module``: torch's own error
    is a traceback that names neither the file nor the fix."""
    if not isinstance(weights, Mapping):
        raise CheckpointError(
            f"{path}: state {name!r} is a {type(weights).__name__}, not the weights of a "
            f"network; the checkpoint was not written for this {type(module).__name__}"
        )
    want = module.state_dict()
    missing = sorted(set(want) - set(weights))
    unexpected = sorted(set(weights) - set(want))
    shapes = [
        f"{k}: checkpoint {tuple(weights[k].shape)}, network {tuple(want[k].shape)}"
        for k in sorted(set(want) & set(weights))
        if hasattr(weights[k], "shape")
        and hasattr(want[k], "shape")
        and tuple(weights[k].shape) != tuple(want[k].shape)
    ]
    problems = []
    if shapes:
        problems.append("shapes differ: " + _names(shapes))
    if missing:
        problems.append("missing from the checkpoint: " + _names(missing))
    if unexpected:
        problems.append("not in the network: " + _names(unexpected))
    if problems:
        raise CheckpointError(
            f"the {name!r} weights in {path} do not fit the {type(module).__name__} built from "
            "the current config (" + "; ".join(problems) + "). The network settings differ "
            "from those the checkpoint was written with: use the run's original settings"
        )


@dataclass
class Checkpoint:
    """A loaded checkpoint. ``state`` is what was passed to ``save`` (objects already turned
    into their state dicts); ``rng`` the RNG states captured at save time."""

    path: Path
    frames: int
    algo: str
    config: dict[str, Any] | None
    state: dict[str, Any]
    rng: dict[str, Any]
    arrays_path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def restore(self, **objects: Any) -> None:
        """``restore(model=net, optim=opt, tracker=tracker)``: ``obj.load_state_dict(state[k])``
        for each keyword, with a clear error if the checkpoint has no such entry."""
        for name, obj in objects.items():
            if name not in self.state:
                raise CheckpointError(
                    f"{self.path} has no state {name!r}; it holds {sorted(self.state)}"
                )
            if isinstance(obj, torch.nn.Module):
                _check_fits(self.path, name, self.state[name], obj)
            obj.load_state_dict(self.state[name])

    def restore_rng(
        self, np_rng: np.random.Generator | Mapping[str, np.random.Generator] | None = None
    ) -> None:
        """Restore Python/NumPy/torch RNG states (and ``np_rng`` in place) to save time."""
        set_rng_states(self.rng, np_rng)

    def load_arrays(self) -> dict[str, np.ndarray]:
        """The arrays saved with ``save(arrays=...)``, read fully into memory ({} if none)."""
        if self.arrays_path is None:
            return {}
        try:
            with np.load(self.arrays_path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception as e:
            raise CheckpointError(
                f"cannot read checkpoint arrays {self.arrays_path}: {type(e).__name__}: {e}"
            ) from e


# --------------------------------------------------------------------------------------------
# Checkpointer
# --------------------------------------------------------------------------------------------
class Checkpointer:
    """Saves checkpoints of one run atomically, keeps the last ``keep``, loads the newest good one.

    ``algo`` and ``config`` are stored in every checkpoint and compared on load: a different
    ``algo``, or any difference in ``match_fields`` (dotted paths such as ``"env_id"``,
    ``"net.hidden"``; default: every field but ``ignore_fields``), raises
    ``CheckpointMismatchError`` naming the fields.

    ``every_frames`` / ``every_seconds`` drive ``due(frames)``: whichever comes first.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        algo: str,
        config: Any = None,
        keep: int = 3,
        match_fields: Iterable[str] | None = None,
        ignore_fields: Iterable[str] = DEFAULT_IGNORE_FIELDS,
        every_frames: int | None = None,
        every_seconds: float | None = None,
    ):
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.algo = algo
        self.config = None if config is None else config_to_dict(config)
        # The defaults of the config's class: the value of a field added since a checkpoint.
        self._defaults = _defaults_of(config)
        self.keep = keep
        self.match_fields = None if match_fields is None else tuple(match_fields)
        self.ignore_fields = tuple(ignore_fields)
        self.every_frames = every_frames
        self.every_seconds = every_seconds
        self._last_frames: int | None = None
        self._last_time = time.monotonic()

    # --- saving ---------------------------------------------------------------------------
    def due(self, frames: int) -> bool:
        """True when ``every_frames`` frames or ``every_seconds`` seconds passed since the last
        ``save`` (or since this Checkpointer was made / the checkpoint was loaded)."""
        if self._last_frames is None:
            self._last_frames = frames
        if self.every_frames is not None and frames - self._last_frames >= self.every_frames:
            return True
        if self.every_seconds is not None:
            return time.monotonic() - self._last_time >= self.every_seconds
        return False

    def save(
        self,
        frames: int,
        state: Mapping[str, Any],
        *,
        arrays: Mapping[str, np.ndarray] | None = None,
        np_rng: np.random.Generator | Mapping[str, np.random.Generator] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Path:
        """Write ``ckpt-<frames>.pt`` (and ``.npz`` for ``arrays``), update ``latest``, prune.

        ``state``: name -> value; values with ``state_dict()`` (modules, optimizers, schedulers,
        ``EpisodeTracker``) are stored as their state dicts; others must be plain Python values or
        tensors. RNG states (Python, NumPy global, torch, and ``np_rng``) are captured here.
        ``arrays``: big NumPy payloads (replay buffer) saved uncompressed to a separate ``.npz``.
        """
        frames = int(frames)
        payload_state = {k: _to_payload(v, k) for k, v in state.items()}
        self.directory.mkdir(parents=True, exist_ok=True)
        pt = self.directory / _ckpt_name(frames)
        npz = pt.with_suffix(".npz")
        arrays_meta = None
        if arrays:
            arrays = {k: np.asarray(v) for k, v in arrays.items()}
            atomic_write(
                npz, lambda f: np.savez(f, **arrays), f"the arrays of checkpoint {pt.name}"
            )
            arrays_meta = {"file": npz.name, "bytes": npz.stat().st_size, "keys": sorted(arrays)}
        elif npz.exists():
            npz.unlink()  # a stale npz from a checkpoint at the same frame count
        payload = {
            "format": FORMAT_VERSION,
            "algo": self.algo,
            "frames": frames,
            "config": self.config,
            "state": payload_state,
            "rng": _to_payload(get_rng_states(np_rng), "rng"),
            "arrays": arrays_meta,
            "meta": _to_payload(
                {"time": time.time(), "torch": torch.__version__, **(meta or {})}, "meta"
            ),
        }
        atomic_write(pt, lambda f: torch.save(payload, f), f"checkpoint {pt.name}")
        atomic_write_text(
            self.directory / "latest", pt.name + "\n", "the pointer to the newest checkpoint"
        )
        self._prune()
        self._last_frames = frames
        self._last_time = time.monotonic()
        return pt

    def _prune(self) -> None:
        ckpts = list_checkpoints(self.directory)
        for old in ckpts[: max(0, len(ckpts) - self.keep)]:
            for p in (old, old.with_suffix(".npz")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
        # npz files whose pt never landed (crash between the two writes)
        kept = {p.stem for p in list_checkpoints(self.directory)}
        for p in self.directory.glob("ckpt-*.npz"):
            if p.stem not in kept:
                p.unlink(missing_ok=True)

    # --- loading --------------------------------------------------------------------------
    def load_latest(self, map_location: Any = "cpu") -> Checkpoint:
        """The newest readable checkpoint, checked against this run's ``algo``/``config``."""
        ckpt = load_latest(self.directory, map_location=map_location)
        self.check_compatible(ckpt)
        self._last_frames = ckpt.frames
        self._last_time = time.monotonic()
        return ckpt

    def check_compatible(self, ckpt: Checkpoint) -> None:
        """Raise ``CheckpointMismatchError`` if ``ckpt`` belongs to another algo or config."""
        diffs: list[tuple[str, Any, Any]] = []
        if ckpt.algo != self.algo:
            diffs.append(("algo", ckpt.algo, self.algo))
        if self.config is not None and ckpt.config is not None:
            diffs += config_diff(
                _with_new_defaults(ckpt.config, self._defaults),
                self.config,
                fields=self.match_fields,
                ignore=self.ignore_fields,
            )
        if diffs:
            lines = "\n".join(f"  {k}: checkpoint {a!r}, now {b!r}" for k, a, b in diffs)
            raise CheckpointMismatchError(
                f"checkpoint {ckpt.path} does not match this run; differing field(s):\n{lines}\n"
                "Resume with the settings the run was started with (see config.json next to "
                "checkpoints/), or start a fresh run in another --run-dir.",
                diffs,
            )


def _defaults_of(config: Any) -> dict[str, Any]:
    """``config_to_dict`` of the default instance of a dataclass config's class ({} for anything
    else, or a class with required fields)."""
    if not (dataclasses.is_dataclass(config) and not isinstance(config, type)):
        return {}
    try:
        return config_to_dict(type(config)())
    except TypeError:
        return {}


def _with_new_defaults(saved: Any, defaults: Mapping[str, Any]) -> Any:
    """A checkpoint's config with the fields added to the config class since it was written
    set to their defaults: a field the run never had means the behaviour it had then, which
    the default keeps, so such a checkpoint still resumes."""
    if not isinstance(saved, Mapping):
        return saved
    return {**{k: v for k, v in defaults.items() if k not in saved}, **saved}


def _arrays_path(path: Path, meta: Any) -> Path:
    """The arrays file a checkpoint names, which must be a plain file name in its folder:
    ``Checkpointer.save`` writes ``ckpt-<frames>.npz`` next to the ``.pt``, so a path (``../x``,
    ``/etc/x``, ``sub/x``) means the file was made or changed by something else, and following
    it would read files outside the run."""
    name = meta.get("file") if isinstance(meta, Mapping) else None
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).name != name
    ):
        raise CheckpointError(
            f"checkpoint {path} names its arrays file {name!r}, which is not a plain file name "
            f"inside {path.parent}: it was not written by rapidrl or was tampered with, and "
            "rapidrl reads no file outside the checkpoint's folder; delete this checkpoint"
        )
    if not isinstance(meta.get("bytes"), int):
        raise CheckpointError(
            f"checkpoint {path} gives no byte size for its arrays file {name!r}: it was not "
            "written by rapidrl or was tampered with; delete this checkpoint"
        )
    return path.parent / name


def _read(path: Path, map_location: Any, read_only: bool = False) -> Checkpoint:
    """Load and validate one checkpoint file; any problem -> ``CheckpointError``. The message
    ends with what to do when resuming, unless ``read_only`` (``load_latest`` then says it)."""
    resume_fix = (
        ""
        if read_only
        else f"; resume from the previous checkpoint in {path.parent} (delete this file), or "
        "start fresh without --resume"
    )
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:
        if "Weights only load failed" in str(e):
            # Torch's message advises weights_only=False or allowlisting the object: advice that
            # runs arbitrary code from a file rapidrl did not write. Say what happened instead.
            found = _REFUSED_GLOBAL.search(str(e))
            what = f" (it refers to {found.group(1)})" if found else ""
            raise CheckpointError(
                f"checkpoint {path} holds objects that torch refuses to load safely{what}: it "
                "was not written by rapidrl, or was tampered with after it was. rapidrl will not "
                "load it; delete it (or move it out of the checkpoints folder)"
                + ("" if read_only else " and resume from an earlier checkpoint or start fresh")
            ) from None
        raise CheckpointError(
            f"checkpoint {path} is corrupt or truncated ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})" + resume_fix
        ) from e
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("format"), int)
        or not isinstance(payload.get("state"), dict)
    ):
        raise CheckpointError(
            f"{path} is not a rapidrl checkpoint (no 'format'/'state' entries)"
            + ("" if read_only else "; delete it or start fresh without --resume")
        )
    if payload["format"] > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {payload['format']}, newer than this rapidrl "
            f"reads ({FORMAT_VERSION}); upgrade rapidrl"
        )
    arrays_path = None
    meta = payload.get("arrays")
    if meta:
        arrays_path = _arrays_path(path, meta)
        size = arrays_path.stat().st_size if arrays_path.is_file() else None
        if size != meta["bytes"]:
            got = "missing" if size is None else f"{size} bytes, expected {meta['bytes']}"
            raise CheckpointError(
                f"checkpoint arrays {arrays_path} are {got} (truncated or lost)"
                + (
                    ""
                    if read_only
                    else "; resume from the previous checkpoint or start fresh without --resume"
                )
            )
    return Checkpoint(
        path=path,
        frames=int(payload.get("frames", 0)),
        algo=payload.get("algo", ""),
        config=payload.get("config"),
        state=CheckpointState(payload["state"], path),
        rng=payload.get("rng", {}),
        arrays_path=arrays_path,
        meta=payload.get("meta", {}),
    )


def load_latest(
    run_dir: str | os.PathLike, *, map_location: Any = "cpu", read_only: bool = False
) -> Checkpoint:
    """Load the newest good checkpoint of ``run_dir`` (a run directory or its ``checkpoints/``).

    A corrupt/truncated newest checkpoint is skipped and the previous one tried, with a
    ``RuntimeWarning``; ``CheckpointError`` if there is none or none is readable. Resuming (the
    default) renames the skipped ones ``*.corrupt`` and points ``latest`` at the one loaded, out
    of the way of the run that goes on; ``read_only=True`` (``rapidrl eval``, inspection) changes
    no file. No config check here: ``Checkpointer.load_latest`` adds it.
    """
    directory = Path(run_dir)
    if (directory / "checkpoints").is_dir():
        directory = directory / "checkpoints"
    candidates = list_checkpoints(directory)[::-1]
    if not candidates:
        raise CheckpointError(
            f"no checkpoint (ckpt-*.pt) in {directory}; "
            + ("train the run first" if read_only else "start fresh without --resume")
        )
    errors = []
    for path in candidates:
        try:
            ckpt = _read(path, map_location, read_only)
        except CheckpointError as e:
            errors.append(str(e))
            continue
        if errors and read_only:
            skipped = ", ".join(p.name for p in candidates[: len(errors)])
            warnings.warn(
                f"skipped {len(errors)} unreadable checkpoint(s) ({skipped}), left in place; "
                f"using the newest readable one, {path.name} ({ckpt.frames} frames), older than "
                f"the run's last. First error: {errors[0]}",
                RuntimeWarning,
                stacklevel=2,
            )
        elif errors:
            for bad in candidates[: len(errors)]:
                for p in (bad, bad.with_suffix(".npz")):
                    if p.exists():
                        os.replace(p, p.with_name(p.name + ".corrupt"))
            warnings.warn(
                f"skipped {len(errors)} unreadable checkpoint(s), renamed to *.corrupt; resuming "
                f"from {path.name} ({ckpt.frames} frames). First error: {errors[0]}",
                RuntimeWarning,
                stacklevel=2,
            )
            atomic_write_text(directory / "latest", path.name + "\n")
        return ckpt
    fix = (
        "there is nothing to load; restore a readable checkpoint from a backup, or train again"
        if read_only
        else "start fresh without --resume (or in another --run-dir)"
    )
    raise CheckpointError(
        f"none of the {len(candidates)} checkpoint(s) in {directory} is readable; {fix}. "
        "Errors:\n  " + "\n  ".join(errors)
    )


def replay_refill_notice(learning_starts: int, capacity: int) -> str:
    """What an off-policy trainer (DQN, SAC) says when it resumes from a checkpoint saved
    without its replay (``--save-replay`` off): the replay starts empty and refills."""
    return (
        f"the checkpoint holds no replay (--save-replay was off): it refills, "
        f"{learning_starts:,} transitions before the next update and {capacity:,} to be full again"
    )


# --------------------------------------------------------------------------------------------
# Ctrl-C
# --------------------------------------------------------------------------------------------
class StopOnInterrupt:
    """Turn the first Ctrl-C (SIGINT, and SIGTERM) into a flag; a second one aborts.

    ::

        with StopOnInterrupt() as stop:
            while frames < total and not stop.requested:
                ...                      # one training iteration
            ckpt.save(frames, ...)       # reached after Ctrl-C too

    Handlers are installed only in the main thread (elsewhere this is a no-op whose flag can still
    be set with ``request()``) and the previous handlers come back on exit.
    """

    def __init__(
        self,
        signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM),
        *,
        message: str = "\nInterrupt: finishing this step, saving a checkpoint and stopping "
        "(press Ctrl-C again to abort without saving)",
    ):
        self.signals = tuple(signals)
        self.message = message
        self.requested = False
        self._previous: dict[int, Any] = {}

    def request(self) -> None:
        self.requested = True

    def _handler(self, signum, frame):
        if self.requested:
            # Second signal: give the default behaviour back and abort now.
            self._restore()
            raise KeyboardInterrupt
        self.requested = True
        if self.message:
            try:
                print(self.message, file=sys.stderr, flush=True)
            except Exception:
                pass

    def _restore(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if prev is None else prev)
        self._previous.clear()

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        self._restore()
