"""``torch.compile`` of a network's forward passes, in place, for the trainers' ``--compile``.

Compiling the methods (not wrapping the module in ``torch.compile(module)``) keeps the module
itself: its ``state_dict`` keys, checkpoints and the weights the Ray workers get are those of
the eager net. Inductor fuses the element-wise work around the convolutions and the linear
layers (normalization, ReLUs and their gradients, the heads' log-softmax); the convolutions stay
oneDNN's. The first call of each compiled method pays the compile; inductor caches it on disk
(``TORCHINDUCTOR_CACHE_DIR``, default under the temp dir), so later runs on the machine pay
little of it.
"""

from __future__ import annotations

import os
import shutil

import torch
from torch import nn

__all__ = ["compile_methods", "cpp_compiler"]


def cpp_compiler() -> str | None:
    """The C++ compiler inductor builds its CPU kernels with (``CXX``, else ``g++``/``c++``/
    ``clang++`` on ``PATH``), or None where there is none."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def compile_methods(module: nn.Module, *names: str) -> nn.Module:
    """Replace each method ``names`` of ``module`` by its ``torch.compile``\\ d form (an instance
    attribute over the class's method); return ``module``. ``forward`` compiled this way is what
    ``module(x)`` runs."""
    for name in names:
        setattr(module, name, torch.compile(getattr(module, name)))
    return module
