"""What machine a run is on: CPU model, the instruction sets that decide learner speed, cores.

Learner throughput differs by several times between CPUs (bf16 convolutions on AMX tiles, AVX-512
vs AVX2 float32 kernels), so every run prints :func:`describe` at its start and records
:func:`hardware_record` in ``summary.json``: a figure always says where it came from.

The flags are read from ``/proc/cpuinfo`` (Linux); elsewhere the model comes from
``platform.processor()`` and the flags are unknown (empty). A cloud VM often names its CPU only
"AMD EPYC" (a Zen 3, a Zen 4 and a Zen 5 all read so, at 2-3x apart in learner speed), so the
vendor's family and model numbers are recorded too, with the core's name where
:func:`core_name` knows it. ``ONEDNN_MAX_CPU_ISA`` and
``ATEN_CPU_CAPABILITY`` cap the ISA torch's kernels use (e.g. ``AVX2`` on an AMX machine, to
measure the AVX2 case): they are recorded too, as is the capability torch reports.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CPUInfo",
    "core_name",
    "cpu_count",
    "cpu_info",
    "describe",
    "hardware_record",
    "parse_cpu_identity",
    "parse_cpuinfo",
]

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
    family: int | None
    """The vendor's CPU family number (``cpu family``; AMD 25 = Zen 3/4, 26 = Zen 5); None where
    unknown."""
    model_number: int | None
    """The vendor's model number within the family (``model``); None where unknown."""
    core: str | None
    """The core's name from vendor, family and model (:func:`core_name`), e.g. "Zen 5"; None
    where the table does not know it."""
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


def _first_processor(text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """The first value of each of ``keys`` in a ``/proc/cpuinfo`` text (the first processor's)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in keys and key not in found:
            found[key] = value.strip()
            if len(found) == len(keys):
                break
    return found


def parse_cpuinfo(text: str) -> tuple[str, set[str]]:
    """``(model name, flags)`` of the first processor in a ``/proc/cpuinfo`` text."""
    found = _first_processor(text, ("model name", "flags"))
    return found.get("model name", ""), set(found.get("flags", "").split())


def parse_cpu_identity(text: str) -> tuple[str, int | None, int | None]:
    """``(vendor_id, cpu family, model)`` of the first processor in a ``/proc/cpuinfo`` text."""
    found = _first_processor(text, ("vendor_id", "cpu family", "model"))

    def number(key: str) -> int | None:
        try:
            return int(found[key])
        except (KeyError, ValueError):
            return None

    return found.get("vendor_id", ""), number("cpu family"), number("model")


# (vendor, family, model range) -> core name: the server and desktop cores of the families these
# machines come in. Ranges from the vendors' model numbering (AMD family 19h: Zen 3 at models
# 00-0Fh, 20-5Fh; Zen 4 at 10-1Fh, 60-7Fh, A0-AFh; family 1Ah: Zen 5).
_CORES: tuple[tuple[str, int, range, str], ...] = (
    ("AuthenticAMD", 23, range(0x00, 0x30), "Zen/Zen+"),
    ("AuthenticAMD", 23, range(0x30, 0x100), "Zen 2"),
    ("AuthenticAMD", 25, range(0x00, 0x10), "Zen 3"),
    ("AuthenticAMD", 25, range(0x10, 0x20), "Zen 4"),
    ("AuthenticAMD", 25, range(0x20, 0x60), "Zen 3"),
    ("AuthenticAMD", 25, range(0x60, 0x80), "Zen 4"),
    ("AuthenticAMD", 25, range(0xA0, 0xB0), "Zen 4"),
    ("AuthenticAMD", 26, range(0x00, 0x100), "Zen 5"),
    ("GenuineIntel", 6, range(0x55, 0x56), "Skylake/Cascade Lake/Cooper Lake"),
    ("GenuineIntel", 6, range(0x6A, 0x6B), "Ice Lake"),
    ("GenuineIntel", 6, range(0x6C, 0x6D), "Ice Lake"),
    ("GenuineIntel", 6, range(0x8F, 0x90), "Sapphire Rapids"),
    ("GenuineIntel", 6, range(0xCF, 0xD0), "Emerald Rapids"),
    ("GenuineIntel", 6, range(0xAD, 0xAF), "Granite Rapids"),
)


def core_name(vendor: str, family: int | None, model: int | None) -> str | None:
    """The core's name for a ``vendor_id``, family and model (e.g. AuthenticAMD 26 2 ->
    "Zen 5"); None where the table above does not list it."""
    if family is None or model is None:
        return None
    for v, f, models, name in _CORES:
        if v == vendor and f == family and model in models:
            return name
    return None


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def available_memory(meminfo_text: str | None = None) -> int | None:
    """Bytes a new allocation can still use: ``MemAvailable`` plus ``SwapFree`` from
    ``/proc/meminfo`` (Linux); None where the OS does not say."""
    if meminfo_text is None:
        try:
            meminfo_text = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    fields = {}
    for line in meminfo_text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[key.strip()] = int(parts[0]) * 1024  # kB
    if "MemAvailable" not in fields:
        return None
    return fields["MemAvailable"] + fields.get("SwapFree", 0)


def require_memory(nbytes: int, what: str, fix: str, meminfo_text: str | None = None) -> None:
    """A clear error now, instead of the OS killing the run hours later: ``what`` will need
    ``nbytes`` (e.g. a replay whose pages fill as it does) and the machine has less available."""
    avail = available_memory(meminfo_text)
    if avail is not None and nbytes > avail:
        from rapidrl.config import ConfigError

        raise ConfigError(
            f"{what} needs {nbytes / 1e9:.1f} GB once full and this machine has "
            f"{avail / 1e9:.1f} GB available (memory and swap); {fix}"
        )


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
    vendor, family, model_number = parse_cpu_identity(cpuinfo_text)
    environ = os.environ if environ is None else environ
    have = {name: flag in flags for name, flag in _FLAGS.items()}
    return CPUInfo(
        model=model or platform.processor() or "unknown CPU",
        family=family,
        model_number=model_number,
        core=core_name(vendor, family, model_number),
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
    """One line: ``AMD EPYC (Zen 5), 2 cores, avx512 avx512_bf16 avx2 (no amx)[; kernels
    capped: ...]``; the core in brackets where known, else ``family F model M`` where the
    numbers are known."""
    info = info or cpu_info()
    have = [n for n in ("amx", "avx512", "avx512_bf16", "avx2") if getattr(info, n)]
    lack = [n for n in ("amx", "avx512") if not getattr(info, n)]
    name = info.model
    if info.core:
        name += f" ({info.core})"
    elif info.family is not None and info.model_number is not None:
        name += f" (family {info.family} model {info.model_number})"
    text = f"{name}, {info.cores} cores, {' '.join(have) or 'no avx2'}"
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
