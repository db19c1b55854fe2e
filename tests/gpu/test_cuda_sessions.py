"""Real pytest sessions on the CUDA backend: one-time initialisation is never a leak, a real
leak names its line, an OOM leaves a snapshot memory_viz opens, a test's own peak reset does
not hide its peak, NVML is explained, and two xdist workers share one GPU."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.gpumem.conftest import plugin_args

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
MiB = 2**20


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["nodeid"].split("::")[-1]: r for r in json.loads(path.read_text())["tests"]}


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*plugin_args(), "--gpumem", "--gpumem-backend=cuda", *args)


ONE_TIME_INIT = """
import pytest
import torch
from torch import nn


@pytest.mark.gpu_mem
def test_first_matmul():
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()


@pytest.mark.gpu_mem
def test_first_backward():
    layer = nn.Linear(64, 64).cuda()
    layer(torch.randn(8, 64, device="cuda")).sum().backward()


@pytest.mark.gpu_mem
def test_bf16_autocast_step():
    layer = nn.Linear(128, 128).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = layer(torch.randn(8, 128, device="cuda"))
    out.float().sum().backward()


@pytest.mark.gpu_mem
def test_cudnn_benchmark_conv():
    torch.backends.cudnn.benchmark = True
    try:
        conv = nn.Conv2d(3, 16, 3).cuda()
        conv(torch.randn(8, 3, 32, 32, device="cuda")).sum().backward()
    finally:
        torch.backends.cudnn.benchmark = False


@pytest.fixture(scope="module")
def trainer():
    model = nn.Linear(256, 256).cuda()
    return model, torch.optim.Adam(model.parameters())


@pytest.mark.gpu_mem(repeat=3)
def test_adam_lazy_state(trainer):
    model, opt = trainer
    opt.zero_grad(set_to_none=True)
    model(torch.randn(8, 256, device="cuda")).sum().backward()
    opt.step()


@pytest.mark.gpu_mem
def test_compiled_function_warm_up():
    f = torch.compile(lambda t: (t.sin() * 2).sum())
    f(torch.randn(1024, device="cuda")).item()
"""


def test_one_time_initialisation_is_not_a_leak(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_init=ONE_TIME_INIT)
    result = _run(pytester, "--gpumem-json=out.json", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
    records = _records(pytester.path / "out.json")
    assert {name: r["leaked_bytes"] for name, r in records.items()} == dict.fromkeys(records, 0)
    # The workspaces exist before every body, so the first matmul's peak is its own tensors:
    # a 256x256 fp32 product (256 KiB), never the 32 MiB cuBLAS workspace.
    assert records["test_first_matmul"]["peak_bytes"] < 2 * MiB
    assert records["test_first_backward"]["peak_bytes"] < 2 * MiB


LEAKS = """
import pytest
import torch

KEPT = []


def grow():
    KEPT.append(torch.ones(2**20, device="cuda"))  # 4 MiB


@pytest.mark.gpu_mem(repeat=3)
def test_grows_every_run():
    grow()


@pytest.mark.gpu_mem
def test_keeps_the_loss():
    w = torch.ones(256, 256, device="cuda", requires_grad=True)
    KEPT.append((w @ w).sum())
"""


def test_a_real_leak_names_the_line_that_allocated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaks=LEAKS)
    result = _run(pytester, "--gpumem-json=out.json")
    result.assert_outcomes(passed=1, failed=1, errors=1)  # a leak is a teardown error
    result.stdout.fnmatch_lines(["*live tensor memory grew by 8.00 MiB over 3 runs*"])
    result.stdout.fnmatch_lines(["made after the first run and still alive (2 storages):",
                                 "*8.00 MiB  2 storages  test_leaks.py:8 in grow*"])
    result.stdout.fnmatch_lines(["*1 surviving tensor(s) still hold grad_fn*"])
    records = _records(pytester.path / "out.json")
    grows = records["test_grows_every_run"]
    assert grows["growth_per_run_bytes"] == [4 * MiB, 4 * MiB]
    site = grows["leak_sites"][0]
    assert (site["bytes"], site["count"]) == (8 * MiB, 2)  # the first run is a warm-up
    assert site["frames"][0]["function"] == "grow" and site["frames"][0]["line"] == 8
    assert records["test_keeps_the_loss"]["graph_tensors"] == 1


OOM_AND_RESET = """
import pytest
import torch
from torch.cuda import reset_peak_memory_stats


def allocate_too_much():
    return torch.empty(2**40, dtype=torch.uint8, device="cuda")


@pytest.mark.gpu_mem(max_gb=1)
def test_real_oom():
    keep = torch.empty(8 * 2**20, dtype=torch.uint8, device="cuda")
    allocate_too_much()


@pytest.mark.gpu_mem(max_gb=0.01)
def test_resets_the_peak_itself():
    big = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    del big
    torch.cuda.reset_peak_memory_stats()
    reset_peak_memory_stats()  # bound at import time, before the plugin measured anything
    small = torch.empty(2**20, dtype=torch.uint8, device="cuda")
"""


def test_oom_snapshot_opens_and_a_reset_hides_no_peak(pytester: pytest.Pytester) -> None:
    from torch.cuda import _memory_viz

    pytester.makepyfile(test_oom=OOM_AND_RESET)
    result = _run(pytester, "--gpumem-json=out.json", "--gpumem-snapshot-dir=snaps")
    result.assert_outcomes(failed=2)
    records = _records(pytester.path / "out.json")
    oom = records["test_real_oom"]
    assert oom["violations"] == ["oom"] and "out of memory" in oom["oom_message"].lower()
    assert oom["context"]["num_ooms"] == 1
    reset = records["test_resets_the_peak_itself"]
    assert reset["violations"] == ["peak"]
    assert reset["peak_bytes"] == 64 * MiB
    # The peak's own allocation is named, read back from the allocator's history.
    assert reset["peak_sites"][0]["bytes"] == 64 * MiB
    assert reset["peak_sites"][0]["frames"][0]["line"] == 18
    snapshot = Path(oom["snapshot"])
    with snapshot.open("rb") as handle:
        data = pickle.load(handle)
    assert any(e["action"] == "oom" for trace in data["device_traces"] for e in trace)
    assert "html" in _memory_viz.trace_plot(data).lower()
    assert "html" in _memory_viz.segment_plot(data).lower()
    # The guard around torch's reset is gone once no window is open.
    assert torch._C._cuda_resetPeakMemoryStats.__module__ != "pytest_gpumem.backends.cuda"


NVML_SUITE = """
import pytest
import torch


@pytest.mark.gpu_mem
def test_allocates():
    keep = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
"""


def test_nvml_view_on_a_real_driver_is_explained(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pynvml")
    pytester.makepyfile(test_nvml=NVML_SUITE)
    result = _run(pytester, "--gpumem-nvml", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1)
    nvml = _records(pytester.path / "out.json")["test_allocates"]["nvml"]
    assert nvml["used_bytes"] >= nvml["torch_reserved_bytes"] >= 256 * MiB
    assert nvml["outside_allocator_bytes"] == nvml["used_bytes"] - nvml["torch_reserved_bytes"]
    if nvml["scope"] == "process":
        assert nvml["outside_allocator_bytes"] > 0  # at least the CUDA context
    result.stdout.fnmatch_lines(["*NVML, highest after*torch's caching allocator reserved*"])
    print(json.dumps(nvml))  # the bench record quotes these figures


XDIST_SUITE = """
import pytest
import torch


@pytest.mark.gpu_mem(max_gb=20 / 1024)
@pytest.mark.parametrize("mib", [1, 2, 4, 8, 16, 32])
def test_sized(mib):
    block = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda")
    del block
"""


def test_two_xdist_workers_share_one_gpu(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_sized=XDIST_SUITE)
    result = _run(pytester, "-n", "2", "--gpumem-json=out.json", "-p", "no:randomly")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*workers: gw0 on cuda:0, gw1 on cuda:0*"])
    records = _records(pytester.path / "out.json")
    assert {r["worker"] for r in records.values()} == {"gw0", "gw1"}
    for mib in (1, 2, 4, 8, 16, 32):
        record = records[f"test_sized[{mib}]"]
        assert record["peak_bytes"] == mib * MiB, record
        assert record["violations"] == (["peak"] if mib == 32 else [])


FAST = """
import pytest
import torch


@pytest.mark.gpu_mem(max_gb=0.001)
def test_over_budget():
    x = torch.ones(2**20, device="cuda")  # 4 MiB
    del x
"""


def test_cuda_fast_measures_the_same_peak_without_history(pytester: pytest.Pytester) -> None:
    """cuda-fast reads the same counters with no allocation history: the same peak and
    verdict, no sites and no snapshot, and the report says why."""
    pytester.makepyfile(test_fast=FAST)
    figures = {}
    for backend in ("cuda", "cuda-fast"):
        result = pytester.runpytest(*plugin_args(), "--gpumem", f"--gpumem-backend={backend}",
                                    f"--gpumem-json={backend}.json", "-p", "no:randomly")
        result.assert_outcomes(failed=1)
        figures[backend] = _records(pytester.path / f"{backend}.json")["test_over_budget"]
    assert figures["cuda"]["peak_bytes"] == figures["cuda-fast"]["peak_bytes"] == 4 * MiB
    assert figures["cuda"]["peak_sites"] and not figures["cuda-fast"]["peak_sites"]
    assert figures["cuda-fast"]["backend"] == "cuda"
    assert "no allocation history" in figures["cuda-fast"]["measurement"]
    assert figures["cuda"]["snapshot"] and figures["cuda-fast"]["snapshot"] is None
