"""rapidrl: fast deep reinforcement learning on modest hardware.

The top-level names are imported lazily so that env worker processes (which import
``rapidrl.envs``) never pay for torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["make_env", "make_vec", "__version__"]


def __getattr__(name: str):
    if name == "make_env":
        from rapidrl.envs import make_env

        return make_env
    if name == "make_vec":
        from rapidrl.vector import make_vec

        return make_vec
    raise AttributeError(f"module 'rapidrl' has no attribute {name!r}")
