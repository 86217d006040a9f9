"""dtype: auto resolves to a precision that is fast on the machine (injected CPU flags: both branches)."""

import pytest
import torch

from depthprune.models import loading
from depthprune.models.loading import cpu_flags, cpu_native_bf16, dtype_name, resolve_dtype

CPU = torch.device("cpu")


UNCAPPED = {"environ": {}, "capability": "AVX512"}  # as on an AVX512-BF16 CPU, whatever this one is


def never_probe():
    raise AssertionError("the torch probe must not be consulted when CPU flags decide")


@pytest.mark.parametrize("flag", ["avx512_bf16", "amx_bf16"])
def test_auto_is_bfloat16_on_cpu_with_native_bf16(flag, caplog):
    flags = {"fpu", "avx2", "avx512f", flag}
    with caplog.at_level("INFO", logger=loading.__name__):
        assert resolve_dtype("auto", CPU, flags=flags, torch_probe=never_probe, **UNCAPPED) is torch.bfloat16
    assert flag in caplog.text and "bfloat16" in caplog.text  # the decision is logged with its reason


@pytest.mark.parametrize(
    "environ, capability, cap",
    [
        ({}, "AVX2", "ATEN_CPU_CAPABILITY"),  # PyTorch's kernels capped: bfloat16 is emulated
        ({}, "DEFAULT", "ATEN_CPU_CAPABILITY"),
        ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "AVX512", "ONEDNN_MAX_CPU_ISA"),  # oneDNN's matmuls capped
        ({"ONEDNN_MAX_CPU_ISA": "avx512_core"}, "AVX512", "ONEDNN_MAX_CPU_ISA"),
    ],
)
def test_auto_is_float32_where_kernels_are_capped_below_the_cpu(environ, capability, cap, caplog):
    flags = {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    with caplog.at_level("INFO", logger=loading.__name__):
        got = resolve_dtype("auto", CPU, flags=flags, torch_probe=never_probe, environ=environ, capability=capability)
    assert got is torch.float32
    assert cap in caplog.text


@pytest.mark.parametrize("onednn", ["ALL", "AVX512_CORE_BF16", "AVX512_CORE_AMX"])
def test_onednn_caps_at_or_above_bf16_keep_bfloat16(onednn):
    flags = {"avx512_bf16"}
    environ = {"ONEDNN_MAX_CPU_ISA": onednn}
    assert resolve_dtype("auto", CPU, flags=flags, environ=environ, capability="AVX512") is torch.bfloat16


def test_auto_is_float32_on_avx2_cpu(caplog):
    flags = {"fpu", "sse4_2", "avx", "avx2", "fma", "avx512f"}  # AVX512 without its BF16 extension
    with caplog.at_level("INFO", logger=loading.__name__):
        assert resolve_dtype("auto", CPU, flags=flags, torch_probe=never_probe) is torch.float32
    assert "float32" in caplog.text


def test_without_cpu_flags_torch_detection_decides():
    assert cpu_native_bf16(set(), torch_probe=lambda: True)[0] is True
    assert cpu_native_bf16(set(), torch_probe=lambda: False)[0] is False

    def broken():
        raise RuntimeError("unknown platform")

    assert cpu_native_bf16(set(), torch_probe=broken)[0] is False  # the safe choice


def test_auto_is_bfloat16_on_cuda_and_explicit_dtypes_win():
    assert resolve_dtype("auto", torch.device("cuda"), flags=set()) is torch.bfloat16
    assert resolve_dtype("float32", CPU, flags={"avx512_bf16"}) is torch.float32
    assert resolve_dtype("bfloat16", CPU, flags=set()) is torch.bfloat16
    with pytest.raises(ValueError, match="option dtype"):
        resolve_dtype("fp8", CPU)
    assert dtype_name(torch.bfloat16) == "bfloat16"


def test_cpu_flags_parses_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t\t: fpu avx2 amx_bf16\n")
    assert cpu_flags(info) == {"fpu", "avx2", "amx_bf16"}
    assert cpu_flags(tmp_path / "missing") is None


def test_real_machine_resolves_to_a_cpu_dtype(monkeypatch):
    monkeypatch.delenv("DEPTHPRUNE_CPU_BF16", raising=False)
    assert resolve_dtype("auto", CPU) in (torch.float32, torch.bfloat16)


def test_every_preset_defaults_to_auto(repo_root):
    import yaml

    for path in [repo_root / "config.yaml", *sorted((repo_root / "config").glob("*.yaml"))]:
        preset = yaml.safe_load(path.read_text())
        # A study that reuses a committed study's runs (base_study), or re-scores its sets
        # (source_study), computes at that study's precision, float32 (fast on every CPU), so that the
        # two are comparable (docs/method.md §9, §11).
        allowed = {"auto", "float32"} if preset.get("base_study") or preset.get("source_study") else {"auto"}
        for alias, model in preset.get("model_table", {}).items():
            assert model.get("dtype", "auto") in allowed, f"{path.name}: model_table.{alias}.dtype"


def test_environment_overrides_detection(monkeypatch):
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "1")
    assert resolve_dtype("auto", CPU) is torch.bfloat16
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "0")
    assert resolve_dtype("auto", CPU) is torch.float32
    monkeypatch.setenv("DEPTHPRUNE_CPU_BF16", "yes")
    with pytest.raises(ValueError, match="DEPTHPRUNE_CPU_BF16"):
        resolve_dtype("auto", CPU)
