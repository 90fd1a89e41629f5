"""CPU detection: model and learner ISAs from /proc/cpuinfo text (faked here), the one-line
description every run prints and the record summary.json keeps."""

import pytest

from rapidrl.hardware import (
    core_name,
    cpu_info,
    describe,
    hardware_record,
    parse_cpu_identity,
    parse_cpuinfo,
)

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 avx avx2 fma bmi2
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse sse2 avx avx2 fma bmi2
"""
SAPPHIRE = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu avx avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""
ZEN4 = """model name\t: AMD EPYC 9B14
flags\t\t: avx avx2 avx512f avx512_bf16 avx512_vnni
"""
# A cloud VM's Zen 5 as it reads there: the model name alone does not tell it from a Zen 4.
ZEN5_VM = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC
flags\t\t: avx avx2 avx512f avx512_bf16
processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
"""


def test_parse_cpuinfo_takes_the_first_processor():
    model, flags = parse_cpuinfo(ZEN3)
    assert model == "AMD EPYC 7B13" and {"avx2", "fma"} <= flags and "avx512f" not in flags


def test_avx2_only_cpu():
    info = cpu_info(ZEN3, environ={})
    assert (info.amx, info.avx512, info.avx512_bf16, info.avx2) == (False, False, False, True)
    assert info.best_isa == "avx2" and info.isa_limit is None
    assert describe(info).startswith("AMD EPYC 7B13, ") and "avx2 (no amx, no avx512)" in describe(
        info
    )


def test_amx_cpu_and_an_isa_cap():
    info = cpu_info(SAPPHIRE, environ={"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"})
    assert info.amx and info.amx_bf16 and info.avx512 and info.best_isa == "amx"
    assert info.isa_limit == "ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2"
    text = describe(info)
    assert "amx avx512" in text and "(no" not in text and "kernels capped: ONEDNN" in text


def test_avx512_bf16_without_amx():
    info = cpu_info(ZEN4, environ={})
    assert info.avx512_bf16 and not info.amx and info.best_isa == "avx512"
    assert "(no amx)" in describe(info)


def test_no_cpuinfo_still_describes_the_machine():
    info = cpu_info("", environ={})
    assert info.model and info.cores >= 1 and info.best_isa == "other"


def test_hardware_record_is_json_ready():
    import json

    record = hardware_record(cpu_info(ZEN3, environ={}))
    assert json.loads(json.dumps(record))["model"] == "AMD EPYC 7B13"
    assert record["best_isa"] == "avx2" and record["description"] == describe(
        cpu_info(ZEN3, environ={})
    )
    assert record["torch_threads"] >= 1


def test_native_bf16_needs_the_instructions_and_no_cap_below_them():
    # AMX or AVX-512 bf16 dot products: precision=auto takes bf16 (2.1x on a Zen 4, measured).
    assert cpu_info(SAPPHIRE, environ={}).native_bf16
    assert cpu_info(ZEN4, environ={}).native_bf16
    assert cpu_info(ZEN4, environ={"ONEDNN_MAX_CPU_ISA": "avx512_core_bf16"}).native_bf16
    assert cpu_info(ZEN4, environ={"ONEDNN_MAX_CPU_ISA": "DEFAULT"}).native_bf16
    # No bf16 instructions: emulated bf16 is slower than float32.
    assert not cpu_info(ZEN3, environ={}).native_bf16
    # Kernels capped below bf16 (the AVX2 measurement case): emulated again.
    capped = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    assert not cpu_info(SAPPHIRE, environ=capped).native_bf16
    assert not cpu_info(ZEN4, environ={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}).native_bf16
    assert not cpu_info(ZEN4, environ={"ATEN_CPU_CAPABILITY": "avx2"}).native_bf16


def test_family_and_model_name_the_core_where_the_model_name_does_not():
    assert parse_cpu_identity(ZEN5_VM) == ("AuthenticAMD", 26, 2)  # the first processor's
    info = cpu_info(ZEN5_VM, environ={})
    assert (info.family, info.model_number, info.core) == (26, 2, "Zen 5")
    assert describe(info).startswith("AMD EPYC (Zen 5), ")
    record = hardware_record(info)
    assert record["core"] == "Zen 5" and record["family"] == 26 and record["model_number"] == 2
    # The families these machines come in; unknown ones say their numbers instead.
    assert core_name("AuthenticAMD", 25, 0x01) == "Zen 3"  # Milan
    assert core_name("AuthenticAMD", 25, 0x11) == "Zen 4"  # Genoa
    assert core_name("AuthenticAMD", 25, 0xA0) == "Zen 4"  # Bergamo
    assert core_name("GenuineIntel", 6, 0x8F) == "Sapphire Rapids"
    assert core_name("GenuineIntel", 6, 0x8F + 1) is None
    assert core_name("AuthenticAMD", None, 2) is None
    unknown = cpu_info(ZEN5_VM.replace("cpu family\t: 26", "cpu family\t: 99"), environ={})
    assert unknown.core is None and describe(unknown).startswith("AMD EPYC (family 99 model 2), ")
    # No identity lines (the fakes above, non-Linux): nothing invented.
    bare = cpu_info(ZEN3, environ={})
    assert (bare.family, bare.model_number, bare.core) == (None, None, None)


MEMINFO = """MemTotal:       24000000 kB
MemFree:         1000000 kB
MemAvailable:    2000000 kB
SwapTotal:       1000000 kB
SwapFree:         500000 kB
"""


def test_available_memory_is_memavailable_plus_free_swap():
    from rapidrl.hardware import available_memory

    assert available_memory(MEMINFO) == (2_000_000 + 500_000) * 1024
    assert available_memory("MemTotal: 10 kB\n") is None  # an old kernel says no more


def test_require_memory_names_the_need_and_the_fix():
    from rapidrl.config import ConfigError
    from rapidrl.hardware import require_memory

    require_memory(2_500_000 * 1024, "the replay", "lower --buffer-size", MEMINFO)  # fits
    with pytest.raises(ConfigError, match=r"the replay needs 2.6 GB once full .* 2.6 GB avail"):
        require_memory(2_500_001 * 1024, "the replay", "lower --buffer-size", MEMINFO)
