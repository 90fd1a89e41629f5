"""Network torsos shared by every algorithm (one place per concept)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rapidrl.hardware import cpu_info


class ConvTorso(nn.Module):
    """Base of the image torsos: uint8 ``[B, C, H, W]`` -> float ``[B, out_dim]``.

    Scales uint8 pixels to [0, 1] inside the module, so callers hand over raw frames (the replay
    buffer and the vector envs stay uint8 end to end: 4x less memory and copy traffic).
    Subclasses build ``self.net``; ``compute_dtype`` (set by :func:`use_precision`) runs it under
    autocast.
    """

    net: nn.Sequential
    out_dim: int

    def __init__(self) -> None:
        super().__init__()
        # None: float32. torch.bfloat16: convolutions and the linear layer run under autocast
        # (weights stay float32, so Adam and the heads see float32); set by use_precision().
        self.compute_dtype: torch.dtype | None = None

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


def _conv_out(size: int, kernel: int, stride: int, padding: int = 0) -> int:
    return (size + 2 * padding - kernel) // stride + 1


class LayoutLayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` over a conv output's whole ``[C, H, W]`` that keeps a channels-last input
    channels-last. The set of numbers normalized together (one sample's) does not depend on the
    memory layout, so a channels-last ``[B, C, H, W]`` is normalized as the contiguous ``[B, H,
    W, C]`` it is in memory, with the per-element weight and bias permuted to match: the same
    function and gradients, with no copy. ``nn.LayerNorm`` itself copies such an input to the
    contiguous layout and hands the next convolution a contiguous output, which it copies back:
    on a 2-core Zen 3 (AVX2) that made PQN's channels-last network train slower than the
    contiguous one; with this module it trained 1.03-1.5x faster than contiguous there (four
    runs of docs/results/zen3_rates' probes; see PQN's ``fast`` preset). Same parameters and
    state-dict keys as ``nn.LayerNorm``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (
            x.dim() != 4
            or x.is_contiguous()
            or not x.is_contiguous(memory_format=torch.channels_last)
        ):
            return super().forward(x)
        x_hwc = x.permute(0, 2, 3, 1)  # [B, H, W, C], contiguous
        weight = bias = None
        if self.weight is not None:
            weight = self.weight.permute(1, 2, 0).contiguous()  # [H, W, C]
        if self.bias is not None:
            bias = self.bias.permute(1, 2, 0).contiguous()
        y = F.layer_norm(x_hwc, x_hwc.shape[1:], weight, bias, self.eps)
        return y.permute(0, 3, 1, 2)  # [B, C, H, W] in channels-last memory


def _with_norm(
    layer: nn.Module, shape: list[int], layer_norm: bool, activation: type[nn.Module] = nn.ReLU
) -> list[nn.Module]:
    """``[layer, LayerNorm(shape), activation]``, or ``[layer, activation]`` without the norm
    (the modules, and so the parameter names, of the networks before the option)."""
    if layer_norm:
        norm = LayoutLayerNorm(shape) if len(shape) == 3 else nn.LayerNorm(shape)
        return [layer, norm, activation()]
    return [layer, activation()]


NATURE_CHANNELS = (32, 64, 64)
"""The Nature-DQN torso's convolution widths."""


class NatureCNN(ConvTorso):
    """The Nature-DQN convolutional torso: conv(32, 8x8, /4), conv(64, 4x4, /2), conv(64, 3x3),
    linear(out_dim), ReLU; ``[B, C, H, W]`` uint8 -> ``[B, out_dim]``. ``channels`` sets the
    three convolutions' widths (the same layers, narrower: fewer multiply-adds per sample).

    ``input_hw`` sizes the linear layer: 84x84 (the DQN protocol) flattens 64 x 7 x 7; 64x64
    flattens 64 x 4 x 4, which with the same convolutions costs about 0.45x the multiply-adds
    (measured here: forward + backward 2.1-2.4x faster per sample).

    ``layer_norm`` puts a LayerNorm after every convolution (over its whole ``[C, H, W]`` output,
    as CleanRL's PQN network) and after the linear layer, each before its ReLU: what keeps PQN
    stable without a target network. False (the default) builds exactly the network without it.
    """

    def __init__(
        self,
        in_channels: int = 4,
        out_dim: int = 512,
        input_hw: tuple[int, int] = (84, 84),
        layer_norm: bool = False,
        channels: tuple[int, int, int] = NATURE_CHANNELS,
    ):
        super().__init__()
        self.out_dim = out_dim
        if len(channels) != 3 or min(channels) < 1:
            raise ValueError(f"NatureCNN needs 3 positive conv widths, got {tuple(channels)}")
        h, w = input_hw
        layers: list[nn.Module] = []
        c = in_channels
        for out_c, k, s in zip(channels, (8, 4, 3), (4, 2, 1)):
            h, w = _conv_out(h, k, s), _conv_out(w, k, s)
            if h < 1 or w < 1:
                raise ValueError(
                    f"NatureCNN needs frames of at least 36x36, got {input_hw[0]}x{input_hw[1]}; "
                    "use --torso small for smaller frames"
                )
            layers += _with_norm(nn.Conv2d(c, out_c, k, stride=s), [out_c, h, w], layer_norm)
            c = out_c
        layers.append(nn.Flatten())
        layers += _with_norm(nn.Linear(c * h * w, out_dim), [out_dim], layer_norm)
        self.net = nn.Sequential(*layers)


class SmallCNN(ConvTorso):
    """The A3C-style CPU torso: 4 x conv(32, 3x3, /2, padding 1) and ReLU, then linear(out_dim),
    ReLU. At 42x42 frames the convolutions give 32 x 3 x 3 features; about a quarter of the Nature
    CNN's multiply-adds per sample (forward + backward measured 2.4-2.7x faster here: small
    convolutions use the CPU less well than the Nature CNN's). ``layer_norm``: a LayerNorm after
    every convolution and the linear layer, before the ReLU (see :class:`NatureCNN`)."""

    def __init__(
        self,
        in_channels: int = 4,
        out_dim: int = 256,
        input_hw: tuple[int, int] = (42, 42),
        layer_norm: bool = False,
    ):
        super().__init__()
        self.out_dim = out_dim
        h, w = input_hw
        layers: list[nn.Module] = []
        c = in_channels
        for _ in range(4):
            h, w = _conv_out(h, 3, 2, 1), _conv_out(w, 3, 2, 1)
            layers += _with_norm(nn.Conv2d(c, 32, 3, stride=2, padding=1), [32, h, w], layer_norm)
            c = 32
        layers.append(nn.Flatten())
        layers += _with_norm(nn.Linear(32 * h * w, out_dim), [out_dim], layer_norm)
        self.net = nn.Sequential(*layers)


TORSOS = ("nature", "small")


MLP_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
"""The MLP torso's activations by name (CleanRL's PPO: tanh; rl_games' MuJoCo recipes: elu)."""


class MLP(nn.Module):
    """Torso for vector observations (classic control, MuJoCo): ``[B, obs_dim]`` ->
    ``[B, out_dim]``: a linear layer and ``activation`` for each width of ``hidden`` (an int: one
    layer), then linear(out_dim) and ``activation``; ``layer_norm`` puts a LayerNorm after each
    linear layer, before its activation. The default is CleanRL's 64 x 64 tanh."""

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 64,
        hidden: int | Sequence[int] = 64,
        layer_norm: bool = False,
        activation: str = "tanh",
    ):
        super().__init__()
        if activation not in MLP_ACTIVATIONS:
            raise ValueError(
                f"unknown MLP activation {activation!r}; choose one of {', '.join(MLP_ACTIVATIONS)}"
            )
        act = MLP_ACTIVATIONS[activation]
        widths = [hidden] if isinstance(hidden, int) else list(hidden)
        self.out_dim = out_dim
        layers: list[nn.Module] = []
        for i, o in zip([in_dim, *widths], [*widths, out_dim]):
            layers += _with_norm(nn.Linear(i, o), [o], layer_norm, act)
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


def make_torso(
    obs_shape: tuple[int, ...],
    out_dim: int | None = None,
    kind: str = "nature",
    layer_norm: bool = False,
    channels: tuple[int, int, int] = NATURE_CHANNELS,
    mlp_widths: Sequence[int] = (64, 64),
    mlp_activation: str = "tanh",
) -> nn.Module:
    """An image torso for stacks ``[C, H, W]`` (``kind``: ``nature`` = :class:`NatureCNN`,
    ``small`` = :class:`SmallCNN`), an MLP for flat vectors (``kind`` does not apply).
    ``layer_norm``: a LayerNorm after every layer, before its activation (PQN). ``channels``:
    the nature torso's convolution widths (the small torso has its own: left at the default;
    like ``kind``, they do not apply to the MLP). ``mlp_widths``: the MLP's layer widths, the
    last its features (``out_dim``, when given, replaces the last); ``mlp_activation``: its
    activation (:data:`MLP_ACTIVATIONS`); neither applies to an image torso."""
    if len(obs_shape) == 3 and kind != "nature" and tuple(channels) != NATURE_CHANNELS:
        raise ValueError(f"conv widths {tuple(channels)} apply to the nature torso, not {kind!r}")
    if len(obs_shape) == 3:
        hw = (int(obs_shape[1]), int(obs_shape[2]))
        if kind == "nature":
            return NatureCNN(
                obs_shape[0], out_dim or 512, input_hw=hw, layer_norm=layer_norm, channels=channels
            )
        if kind == "small":
            return SmallCNN(obs_shape[0], out_dim or 256, input_hw=hw, layer_norm=layer_norm)
        raise ValueError(f"unknown torso {kind!r}; choose one of {', '.join(TORSOS)}")
    if len(obs_shape) == 1:
        widths = list(mlp_widths)
        if not widths or min(widths) < 1:
            raise ValueError(f"MLP widths must be one or more positive ints, got {tuple(widths)}")
        return MLP(
            obs_shape[0],
            out_dim or widths[-1],
            widths[:-1],
            layer_norm=layer_norm,
            activation=mlp_activation,
        )
    raise ValueError(f"no torso for observation shape {obs_shape}; expected [C, H, W] or [D]")


# 8-bit frame stacks of C channels are interleaved through integers of C bytes (little-endian:
# channel c is byte c of an element); the chunks keep the integer temporaries in cache.
_PACKED = {2: torch.int16, 4: torch.int32}
_PACK_CHUNK_BYTES = 2**21


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` in ``torch.channels_last`` memory format (the same values; ``x`` itself when it
    already is). A uint8 stack of 2 or 4 frames on CPU is interleaved as 16- or 32-bit integers,
    one frame per byte: torch's own strided copy moves one byte at a time (a replay batch of
    256 x [2, 52, 52]: 1.5-1.7 ms against 0.2 on a 2-core Zen 3; 64 x [4, 84, 84]: 1.2-1.5
    against 0.6)."""
    if x.dim() != 4 or x.is_contiguous(memory_format=torch.channels_last):
        return x
    n, c, h, w = x.shape
    wide = _PACKED.get(c)
    if (
        wide is None
        or x.dtype != torch.uint8
        or x.device.type != "cpu"
        or sys.byteorder != "little"
        or not x.is_contiguous()
    ):
        return x.contiguous(memory_format=torch.channels_last)
    out = torch.empty((n, h, w, c), dtype=torch.uint8)  # [N, H, W, C]
    packed = out.view(n, h * w * c).view(wide)  # [N, H*W]: one integer a pixel
    planes = x.view(n, c, h * w)
    rows = max(1, _PACK_CHUNK_BYTES // (c * h * w))
    for i in range(0, n, rows):
        src, dst = planes[i : i + rows], packed[i : i + rows]
        dst.copy_(src[:, 0])  # byte 0; the others are zero until OR-ed in
        for k in range(1, c):
            # The top byte's shift wraps to a negative integer: the bits are what count.
            dst |= src[:, k].to(wide) << (8 * k)
    return out.permute(0, 3, 1, 2)


def _input_to_channels_last(module: nn.Module, args: tuple) -> tuple:
    return (to_channels_last(args[0]), *args[1:])


def use_channels_last(torso: nn.Module) -> nn.Module:
    """Run a conv torso in channels-last layout (faster oneDNN convolutions on CPU: the Nature
    CNN's training step ~1.4x on an AVX-512 Xeon, 1.2-1.4x on an AVX2-only Zen 3; PQN's net,
    whose LayerNorms are :class:`LayoutLayerNorm`, 1.03-1.5x there, see PQN's ``fast`` preset).
    Weights are converted once; inputs on every call."""
    torso.to(memory_format=torch.channels_last)
    torso.register_forward_pre_hook(_input_to_channels_last)
    return torso


Precision = str  # "fp32" | "bf16" | "auto"
PRECISIONS = ("fp32", "bf16", "auto")


def native_bf16(device: torch.device | str) -> bool:
    """Whether ``device`` multiplies bf16 matrices in hardware: a CUDA GPU with bf16 support, or
    a CPU whose :attr:`rapidrl.hardware.CPUInfo.native_bf16` holds (AMX tiles, or AVX-512 bf16
    dot products as on Zen 4, with torch's kernels not capped below them). Measured training
    cost per sample of the Nature CNN at 84x84, batch 512 (``scripts/torso_costs.py --bf16``):
    AMX ~2.8x faster than float32; a Zen 4 EPYC (avx512_bf16, no AMX) 2.1x; the same capped to
    AVX2, ~10x slower (emulated)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return _cpu_native_bf16()
    return False


@functools.cache
def _cpu_native_bf16() -> bool:
    try:
        onednn_bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False
    return onednn_bf16 and cpu_info().native_bf16


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
    """Run every conv torso inside ``model`` under autocast to ``dtype`` (None: float32).
    MLP torsos stay float32 (too small to gain)."""
    for m in model.modules():
        if isinstance(m, ConvTorso):
            m.compute_dtype = dtype
    return model
