"""What machine a run is on: CPU model, the instruction sets that decide learner speed, cores.

Learner throughput differs by several times between CPUs (bf16 convolutions on AMX tiles, AVX-512
vs AVX2 float32 kernels), so every run prints :func:`describe` at its start and records
:func:`hardware_record` in ``summary.json``: a figure always says where it came from.

The flags are read from ``/proc/cpuinfo`` (Linux); elsewhere the model comes from
``platform.processor()`` and the flags are unknown (empty). ``ONEDNN_MAX_CPU_ISA`` and
``ATEN_CPU_CAPABILITY`` cap the ISA torch's kernels use (e.g. ``AVX2`` on an AMX machine, to
measure the AVX2 case): they are recorded too, as is the capability torch reports.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["CPUInfo", "cpu_count", "cpu_info", "describe", "hardware_record", "parse_cpuinfo"]

# The flags that matter for the learner, as /proc/cpuinfo spells them.
_FLAGS = {
    "amx": "amx_tile",
    "amx_bf16": "amx_bf16",
    "avx512": "avx512f",
    "avx512_bf16": "avx512_bf16",
    "avx2": "avx2",
}


@dataclass(frozen=True)
class CPUInfo:
    """The CPU as far as the learner's speed goes."""

    model: str
    """Model name, e.g. "AMD EPYC 7B13" or "Intel(R) Xeon(R) Platinum 8481C"."""
    amx: bool
    """AMX tiles (Sapphire Rapids and later): bf16 convolutions several times faster."""
    amx_bf16: bool
    avx512: bool
    """AVX-512 foundation: wider float32 kernels."""
    avx512_bf16: bool
    """AVX-512 bf16 dot products (Cooper Lake, Zen 4): bf16 without AMX tiles."""
    avx2: bool
    cores: int
    """CPUs this process may run on."""
    isa_limit: str | None
    """``ONEDNN_MAX_CPU_ISA`` / ``ATEN_CPU_CAPABILITY`` when set: kernels capped below the CPU."""
    native_bf16: bool
    """bf16 matrix products in hardware and not capped away: AMX tiles or AVX-512 bf16 dot
    products. Where False, bf16 is emulated and slower than float32 (measured ~10x on a Zen 4
    capped to AVX2), so ``precision=auto`` keeps float32."""

    @property
    def best_isa(self) -> str:
        """The widest of amx, avx512, avx2 the CPU has (``"other"`` if none)."""
        if self.amx:
            return "amx"
        if self.avx512:
            return "avx512"
        if self.avx2:
            return "avx2"
        return "other"


def parse_cpuinfo(text: str) -> tuple[str, set[str]]:
    """``(model name, flags)`` of the first processor in a ``/proc/cpuinfo`` text."""
    model, flags = "", set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
        if model and flags:
            break
    return model, flags


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _isa_limit(environ: dict[str, str] | os._Environ) -> str | None:
    parts = [
        f"{name}={environ[name]}"
        for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
        if environ.get(name)
    ]
    return ", ".join(parts) or None


# ONEDNN_MAX_CPU_ISA values that still let oneDNN use bf16 instructions (its ISA names, upper
# case); anything else (SSE41, AVX, AVX2, AVX512_CORE, AVX512_CORE_VNNI, ...) stops below them.
_ONEDNN_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10", "ALL")


def _bf16_allowed(environ: dict[str, str] | os._Environ) -> bool:
    onednn = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if onednn and onednn != "DEFAULT" and not onednn.startswith(_ONEDNN_BF16_ISAS):
        return False
    aten = environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    return aten in ("", "default") or aten.startswith("avx512")


def cpu_info(cpuinfo_text: str | None = None, environ: dict[str, str] | None = None) -> CPUInfo:
    """This machine's :class:`CPUInfo` (tests pass a fake ``cpuinfo_text`` and ``environ``)."""
    if cpuinfo_text is None:
        try:
            cpuinfo_text = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo_text = ""
    model, flags = parse_cpuinfo(cpuinfo_text)
    environ = os.environ if environ is None else environ
    have = {name: flag in flags for name, flag in _FLAGS.items()}
    return CPUInfo(
        model=model or platform.processor() or "unknown CPU",
        **have,
        cores=cpu_count(),
        isa_limit=_isa_limit(environ),
        native_bf16=(have["amx_bf16"] or have["avx512_bf16"]) and _bf16_allowed(environ),
    )


def _torch_capability() -> str | None:
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except (ImportError, AttributeError, RuntimeError):
        return None


def describe(info: CPUInfo | None = None) -> str:
    """One line: ``AMD EPYC 7B13, 2 cores, avx2 (no avx512, no amx)[, capped: ...]``."""
    info = info or cpu_info()
    have = [n for n in ("amx", "avx512", "avx512_bf16", "avx2") if getattr(info, n)]
    lack = [n for n in ("amx", "avx512") if not getattr(info, n)]
    text = f"{info.model}, {info.cores} cores, {' '.join(have) or 'no avx2'}"
    if lack:
        text += f" (no {', no '.join(lack)})"
    if info.isa_limit:
        text += f"; kernels capped: {info.isa_limit}"
    return text


def hardware_record(info: CPUInfo | None = None) -> dict[str, Any]:
    """What ``summary.json`` records under ``hardware``: the :class:`CPUInfo` fields, the best
    ISA, torch's CPU capability and thread count, and the one-line description."""
    info = info or cpu_info()
    record: dict[str, Any] = asdict(info)
    record["best_isa"] = info.best_isa
    record["torch_cpu_capability"] = _torch_capability()
    try:
        import torch

        record["torch_threads"] = torch.get_num_threads()
    except ImportError:
        record["torch_threads"] = None
    record["description"] = describe(info)
    return record
