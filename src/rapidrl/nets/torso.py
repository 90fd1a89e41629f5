"""Network torsos shared by every algorithm (one place per concept)."""

from __future__ import annotations

import torch
from torch import nn


class NatureCNN(nn.Module):
    """The Nature-DQN convolutional torso: uint8 ``[B, C, 84, 84]`` -> float ``[B, out_dim]``.

    Scales uint8 pixels to [0, 1] inside the module, so callers hand over raw frames (the replay
    buffer and the vector envs stay uint8 end to end: 4x less memory and copy traffic).
    """

    def __init__(self, in_channels: int = 4, out_dim: int = 512):
        super().__init__()
        self.out_dim = out_dim
        # None: float32. torch.bfloat16: convolutions and the linear layer run under autocast
        # (weights stay float32, so Adam and the heads see float32); set by use_precision().
        self.compute_dtype: torch.dtype | None = None
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, out_dim),
            nn.ReLU(),
        )

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` as this torso's input: scaled to [0, 1] in the compute dtype (float32 or
        bf16). ``forward`` takes such a tensor as is, so a batch read several times (PPO's
        epochs) is converted once instead of once per minibatch."""
        x = obs.to(self.compute_dtype or torch.float32)
        return x.div_(255.0) if obs.dtype == torch.uint8 else x

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # Straight from uint8 to the compute dtype: under bf16 a float32 copy of the frames
        # would be written, read and cast again (a PPO minibatch of 256 stacks is 29 MB of
        # float32; skipping it makes forward + backward measurably faster). 0..255 are exact in
        # bf16 and the division rounds once from float32, as autocast's cast of x / 255 does.
        x = self.prepare(obs)
        if self.compute_dtype is None:
            return self.net(x)
        with torch.autocast(x.device.type, dtype=self.compute_dtype):
            h = self.net(x)
        # Heads, losses and the LSTM after the torso stay float32: only the convolutions (all
        # but a few percent of the FLOPs) pay bf16's 8-bit mantissa.
        return h.float()


class MLP(nn.Module):
    """Torso for vector observations (classic control): ``[B, obs_dim]`` -> ``[B, out_dim]``."""

    def __init__(self, in_dim: int, out_dim: int = 64, hidden: int = 64):
        super().__init__()
        self.out_dim = out_dim
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, out_dim), nn.Tanh()
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


def make_torso(obs_shape: tuple[int, ...], out_dim: int | None = None) -> nn.Module:
    """NatureCNN for image stacks ``[C, 84, 84]``, MLP for flat vectors."""
    if len(obs_shape) == 3:
        return NatureCNN(obs_shape[0], out_dim or 512)
    if len(obs_shape) == 1:
        return MLP(obs_shape[0], out_dim or 64)
    raise ValueError(f"no torso for observation shape {obs_shape}; expected [C, H, W] or [D]")


def _input_to_channels_last(module: nn.Module, args: tuple) -> tuple:
    return (args[0].contiguous(memory_format=torch.channels_last), *args[1:])


def use_channels_last(torso: nn.Module) -> nn.Module:
    """Run a conv torso in channels-last layout (faster oneDNN convolutions on CPU; measured
    ~1.4x on the Nature CNN here). Weights are converted once; inputs on every call."""
    torso.to(memory_format=torch.channels_last)
    torso.register_forward_pre_hook(_input_to_channels_last)
    return torso


Precision = str  # "fp32" | "bf16" | "auto"
PRECISIONS = ("fp32", "bf16", "auto")


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` multiplies bf16 matrices in hardware: a CUDA GPU with bf16 support, or
    a CPU with AMX tiles (Sapphire Rapids and later), where oneDNN runs bf16 convolutions several
    times faster than float32 (measured here: a batch-32 DQN update 26 ms -> 9 ms)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.cpu._is_amx_tile_supported()) and bool(
                torch.ops.mkldnn._is_mkldnn_bf16_supported()
            )
        except (AttributeError, RuntimeError):  # older torch or a build without oneDNN
            return False
    return False


def resolve_precision(precision: Precision, device: torch.device | str) -> torch.dtype | None:
    """``"fp32"`` -> None, ``"bf16"`` -> bfloat16, ``"auto"`` -> bfloat16 where
    :func:`native_bf16` (emulated bf16 is slower than float32), else None."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    raise ValueError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")


def use_precision(model: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """Run every Nature-CNN torso inside ``model`` under autocast to ``dtype`` (None: float32).
    MLP torsos stay float32 (too small to gain)."""
    for m in model.modules():
        if isinstance(m, NatureCNN):
            m.compute_dtype = dtype
    return model
