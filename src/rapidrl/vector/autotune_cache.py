"""The autotune cache: which vector layout was fastest on this machine, for ``backend="auto"``.

One JSON file (``~/.cache/rapidrl/autotune.json``; ``$RAPIDRL_CACHE_DIR`` or ``$XDG_CACHE_HOME``
move it) maps ``"<hostname>|<cpus>|<env id>|<num_envs>"`` to a choice
``{"backend", "num_workers", "batch_size", "inline", "spin"}`` plus what was measured. ``rapidrl bench envs
--autotune`` writes it; :func:`rapidrl.vector.make_vec` reads it.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

_VERSION = 1


def autotune_path() -> Path:
    if os.environ.get("RAPIDRL_CACHE_DIR"):
        base = Path(os.environ["RAPIDRL_CACHE_DIR"])
    elif os.environ.get("XDG_CACHE_HOME"):
        base = Path(os.environ["XDG_CACHE_HOME"]) / "rapidrl"
    else:
        base = Path.home() / ".cache" / "rapidrl"
    return base / "autotune.json"


def canonical_env_id(env_id: str) -> str:
    """The id the cache is keyed by (``"pong"`` for ``"ALE/Pong-v5"``): what
    ``rapidrl bench envs --autotune`` stores, ``resolve_env(env_id).env_id``."""
    try:
        from rapidrl.envs import resolve_env
    except ImportError:
        return env_id
    try:
        return resolve_env(env_id).env_id
    except ValueError:  # unknown id: make_vec will say so
        return env_id


def cache_key(env_id: str, num_envs: int) -> str:
    return f"{platform.node()}|{os.cpu_count()}|{env_id}|{int(num_envs)}"


def _unusable(path: Path, why: str) -> dict[str, Any]:
    warnings.warn(
        f"the autotune cache {path} is unusable ({why}); every backend='auto' env takes the "
        "default layout until `rapidrl bench envs --autotune` writes it again (or delete it)",
        RuntimeWarning,
        stacklevel=3,
    )
    return {"version": _VERSION, "entries": {}}


def _read(path: Path) -> dict[str, Any]:
    """The cache's content; an empty cache if the file is absent, or (with a warning) if it
    cannot be read or parsed: a cache is never worth failing a run for."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {"version": _VERSION, "entries": {}}
    except OSError as exc:
        return _unusable(path, exc.strerror or str(exc))
    except ValueError as exc:  # not UTF-8 (UnicodeDecodeError) or not JSON (JSONDecodeError)
        return _unusable(path, f"not a JSON file: {type(exc).__name__}")
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        return _unusable(path, "not the {'version', 'entries'} object rapidrl writes")
    return data


def load_autotune(env_id: str, num_envs: int, path: str | Path | None = None) -> dict | None:
    """The stored choice for this machine, env and ``num_envs``, or ``None``."""
    entry = _read(Path(path) if path else autotune_path())["entries"].get(
        cache_key(env_id, num_envs)
    )
    if not isinstance(entry, dict) or "backend" not in entry:
        return None
    return entry


def save_autotune(
    env_id: str,
    num_envs: int,
    choice: dict[str, Any],
    *,
    steps_per_s: float | None = None,
    path: str | Path | None = None,
) -> Path | None:
    """Store ``choice`` (``backend``, ``num_workers``, ``batch_size``); returns the file's path,
    or None (with a warning) if the file could not be written: a cache is never worth failing a
    run for.

    The file is replaced atomically, so a concurrent reader sees the old or the new content.
    """
    if "backend" not in choice:
        raise ValueError(f"an autotune choice needs a 'backend', got {choice}")
    path = Path(path) if path else autotune_path()
    data = _read(path)
    data["version"] = _VERSION
    entry = {
        "backend": choice["backend"],
        "num_workers": choice.get("num_workers"),
        "batch_size": choice.get("batch_size"),
        "inline": bool(choice.get("inline", False)),
        "spin": float(choice.get("spin") or 0.0),
        "steps_per_s": steps_per_s,
        "env_id": env_id,
        "num_envs": int(num_envs),
        "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    data["entries"][cache_key(env_id, num_envs)] = entry
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".autotune-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        warnings.warn(
            f"could not write the autotune cache {path} ({exc.strerror or exc}); the measured "
            f"layout is not kept",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return path
