"""Real pytest sessions on the CPU backend: which tests pass, fail, and why."""

from __future__ import annotations

import json

import pytest

from tests.gpumem.conftest import RunGpumem

HEADER = """
import pytest
import torch

KEPT = []
"""


def test_within_budget_passes(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.01)
def test_small():
    a = torch.zeros(1024, 1024)  # 4 MiB, under 10.24 MiB
    assert float(a.sum()) == 0.0
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpumem: 1 highest peaks*", "*4.00 MiB*test_small*"])


def test_over_budget_fails_with_memory_letter(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.001)
def test_big():
    a = torch.zeros(1024, 1024)
    b = a + 1
    assert b.shape == a.shape
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*.py M*",
            "*peak 8.00 MiB exceeds budget max_gb=0.001 (1.02 MiB) [[]backend cpu, device cpu[]]",
            "*CPU measurement*",
            "*4.00 MiB  1 storage  test_over_budget_fails_with_memory_letter.py:8 in test_big",
            "*4.00 MiB  1 storage  test_over_budget_fails_with_memory_letter.py:9 in test_big",
            "MEMORY *::test_big - *",
        ]
    )


def test_transient_peak_counts_though_freed(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.005)
def test_transient():
    for _ in range(3):
        tmp = torch.ones(2 * 1024 * 1024)  # 8 MiB, freed on the next iteration
        del tmp
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*peak 8.00 MiB exceeds budget*"])
    result.stdout.no_fnmatch_line("*leaked*")


def test_leaked_tensor_fails(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem
def test_leaks():
    KEPT.append(torch.ones(1024))
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)  # found after teardown: a teardown error
    result.stdout.fnmatch_lines(
        [
            "*.py .M*",
            "*ERROR at teardown of test_leaks*",
            "*leaked 4.00 KiB still alive after teardown (max_leak_mb=0)"
            "; held by global 'KEPT' of test_leaked_tensor_fails.py*",
            "*still alive after teardown (1 storage):",
            "*4.00 KiB  1 storage  test_leaked_tensor_fails.py:8 in test_leaks",
        ]
    )


def test_over_budget_and_leaking_fails_on_both(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """The peak fails the call and the leak the teardown, each with its own text; the leak
    check was skipped once the peak had failed."""
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.001)
def test_big_and_kept():
    KEPT.append(torch.ones(1024, 1024))  # 4 MiB: over the 1.02 MiB budget, and kept
"""
    )
    result = run_gpumem("--gpumem", "--gpumem-json=out.json")
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines_random([
        "*ERROR at teardown of test_big_and_kept*",
        "leaked 4.00 MiB still alive after teardown (max_leak_mb=0)*",
        "peak 4.00 MiB exceeds budget max_gb=0.001 (1.02 MiB)*",
    ])
    (record,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert record["violations"] == ["peak", "leak"]
    assert record["leaked_bytes"] == 4 * 2**20


def test_leak_within_tolerance_passes(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_leak_mb=0.01)
def test_small_leak():
    KEPT.append(torch.ones(1024))  # 4 KiB < 10.24 KiB

@pytest.mark.gpu_mem(max_leak_mb=0.001)
def test_bigger_leak():
    KEPT.append(torch.ones(1024))  # 4 KiB > 1.02 KiB
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["MEMORY *test_bigger_leak*"])


def test_leaked_graph_names_grad_fn(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem
def test_keeps_loss():
    model = torch.nn.Linear(64, 64)
    loss = model(torch.randn(8, 64)).relu().sum()
    KEPT.append(loss)  # keeps the graph and its saved activations
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*leaked*still alive after teardown*",
            "*1 surviving tensor(s) still hold grad_fn*loss.item() or tensor.detach()*",
        ]
    )


def test_detached_value_is_no_leak(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem
def test_keeps_number():
    model = torch.nn.Linear(64, 64)
    loss = model(torch.randn(8, 64)).relu().sum()
    KEPT.append(loss.item())
"""
    )
    run_gpumem("--gpumem").assert_outcomes(passed=1)


def test_unmarked_test_is_untouched(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
def test_plain():
    KEPT.append(torch.ones(1024 * 1024))
"""
    )
    result = run_gpumem("--gpumem", "--gpumem-json", "out.json")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*gpumem: *highest peaks*")
    assert json.loads((pytester.path / "out.json").read_text())["tests"] == []


def test_markers_are_inert_without_the_flag(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.0001)
def test_big():
    KEPT.append(torch.ones(1024 * 1024))
"""
    )
    result = run_gpumem()
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*gpumem*")


def test_out_of_memory_is_a_budget_failure(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=1)
def test_oom():
    big = torch.ones(1024)
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*.py M*",
            "*torch.OutOfMemoryError inside the test (CUDA out of memory. Tried to allocate"
            " 20.00 GiB)*",
            "MEMORY *test_oom*",
        ]
    )


def test_own_failure_gets_no_memory_verdict(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.0001)
def test_broken():
    KEPT.append(torch.ones(1024 * 1024))
    assert 1 == 2
"""
    )
    result = run_gpumem("--gpumem", "--gpumem-json", "out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*.py F*", "FAILED *test_broken*assert 1 == 2*"])
    result.stdout.no_fnmatch_line("*MEMORY*")
    (record,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert record["outcome"] == "failed"
    assert record["violations"] == []
    assert record["peak_bytes"] == 4 * 1024 * 1024


def test_function_fixture_freed_at_teardown_is_no_leak(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.fixture
def weights():
    w = torch.ones(1024, 1024)
    yield w
    del w

@pytest.fixture
def returned():
    return torch.ones(1024)

@pytest.mark.gpu_mem
def test_uses_fixtures(weights, returned):
    assert weights.shape == (1024, 1024) and returned.shape == (1024,)
"""
    )
    run_gpumem("--gpumem").assert_outcomes(passed=1)


def test_function_fixture_that_stashes_memory_leaks(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.fixture
def stash():
    KEPT.append(torch.ones(256))

@pytest.mark.gpu_mem
def test_uses_stash(stash):
    pass
"""
    )
    result = run_gpumem("--gpumem")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*leaked 1.00 KiB*", "*in stash"])


def test_wider_scoped_fixture_memory_is_not_the_tests_leak(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.fixture(scope="module")
def model():
    return torch.nn.Linear(256, 256)

@pytest.mark.gpu_mem(max_gb=0.0001)
def test_first_user(model):
    assert model.weight.shape == (256, 256)

@pytest.mark.gpu_mem(max_gb=0.0001)
def test_second_user(model):
    assert model.bias.shape == (256,)
"""
    )
    run_gpumem("--gpumem").assert_outcomes(passed=2)


def test_repeat_separates_lazy_state_from_per_run_leaks(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    """Growth on every run fails; its report names what the runs after the first made and
    still hold (the warm-up run's lazy state and a function fixture's tensor are not it)."""
    pytester.makepyfile(
        HEADER
        + """
CACHE = {}

@pytest.fixture
def batch():
    return torch.ones(4096)  # 16 KiB, made in setup

@pytest.mark.gpu_mem(repeat=3)
def test_lazy_cache():
    CACHE.setdefault("table", torch.ones(1024))  # allocated on the first run only

@pytest.mark.gpu_mem(repeat=3)
def test_grows_every_run(batch):
    CACHE.setdefault("other", torch.ones(2048))  # lazy: the first run only
    KEPT.append(torch.ones(1024))
"""
    )
    result = run_gpumem("--gpumem", "-rA", "--gpumem-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*live tensor memory grew by 8.00 KiB over 3 runs*",
            "*after each of 3 runs: 28.00 KiB, 32.00 KiB, 36.00 KiB*",
            "made after the first run and still alive (2 storages):",
            "*8.00 KiB  2 storages  test_repeat_separates_lazy_state_from_per_run_leaks.py:*"
            " in test_grows_every_run",
            "kept alive by: global 'KEPT' of *(2 storages, 8.00 KiB)",
            "MEMORY *test_grows_every_run*",
        ]
    )
    records = {r["nodeid"].split("::")[-1]: r for r in json.loads(
        (pytester.path / "out.json").read_text())["tests"]}
    grows = records["test_grows_every_run"]
    assert (grows["leaked_bytes"], grows["leaked_storages"]) == (8192, 2)
    assert [s["count"] for s in grows["leak_sites"]] == [2]


def test_json_report(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem(max_gb=0.5, max_leak_mb=1)
def test_fine():
    a = torch.zeros(1000)

@pytest.mark.gpu_mem(max_gb=0.0001)
def test_over():
    a = torch.zeros(1000000)

@pytest.mark.gpu_mem
@pytest.mark.skip(reason="no")
def test_skipped():
    pass
"""
    )
    run_gpumem("--gpumem", "--gpumem-json", "report/out.json").assert_outcomes(
        passed=1, failed=1, skipped=1
    )
    data = json.loads((pytester.path / "report" / "out.json").read_text())
    by_name = {r["nodeid"].split("::")[1]: r for r in data["tests"]}
    fine, over, skipped = by_name["test_fine"], by_name["test_over"], by_name["test_skipped"]
    assert fine["outcome"] == "passed"
    assert (fine["backend"], fine["device"]) == ("cpu", "cpu")
    assert fine["peak_bytes"] == 4000
    assert fine["leaked_bytes"] == 0
    assert fine["budget_bytes"] == 2**29
    assert fine["max_leak_bytes"] == 2**20
    assert over["outcome"] == "memory"
    assert over["violations"] == ["peak"]
    assert over["peak_bytes"] == 4_000_000
    assert over["peak_sites"][0]["bytes"] == 4_000_000
    assert over["peak_sites"][0]["frames"][0]["function"] == "test_over"
    assert skipped["outcome"] == "skipped"
    assert skipped["peak_bytes"] is None


def test_verbosity_levels(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
def helper():
    return torch.ones(1024, 1024)

@pytest.mark.gpu_mem(max_gb=0.001)
def test_big():
    a = helper()
    b = a * 2
"""
    )
    quiet = run_gpumem("--gpumem", "-q")
    quiet.stdout.fnmatch_lines(
        [
            "*_ test_big _*",
            "peak 8.00 MiB exceeds budget max_gb=0.001 (1.02 MiB) [[]backend cpu, device cpu[]]",
            "MEMORY test_verbosity_levels.py::test_big - peak 8.00 MiB*",
        ]
    )
    # the node id once per failure: in the short summary, not again in the failure text
    assert quiet.stdout.str().count("test_verbosity_levels.py::test_big") == 2  # + peaks list
    quiet.stdout.no_fnmatch_line("*largest allocations*")
    default = run_gpumem("--gpumem")
    default.stdout.fnmatch_lines(["*largest allocations alive at the peak:*", "*in helper"])
    default.stdout.no_fnmatch_line("*called from*")
    full = run_gpumem("--gpumem", "-vv")
    full.stdout.fnmatch_lines(
        [
            "*4.00 MiB  1 storage  test_verbosity_levels.py:7 in helper",
            "*called from test_verbosity_levels.py:11 in test_big",
        ]
    )
    # -vv (and CI) print summary messages unabridged: the memory one stays a single line.
    lines = full.stdout.lines
    after = lines[next(i for i, line in enumerate(lines) if "short test summary" in line) + 1 :]
    assert after[0].startswith("MEMORY test_verbosity_levels.py::test_big - peak 8.00 MiB")
    assert after[1].startswith("==") and "1 failed" in after[1]


def test_round_option_mirrors_allocator_blocks(
    pytester: pytest.Pytester, run_gpumem: RunGpumem
) -> None:
    pytester.makepyfile(
        HEADER
        + """
@pytest.mark.gpu_mem
def test_small():
    a = torch.zeros(3)
"""
    )
    run_gpumem("--gpumem", "--gpumem-round=512", "--gpumem-json", "o.json").assert_outcomes(
        passed=1
    )
    (record,) = json.loads((pytester.path / "o.json").read_text())["tests"]
    assert record["peak_bytes"] == 512
    assert "rounded up to 512 B" in record["measurement"]


def test_fixtures_measure_blocks(pytester: pytest.Pytester, run_gpumem: RunGpumem) -> None:
    pytester.makepyfile(
        HEADER
        + """
def test_track(gpumem, gpumem_device):
    assert gpumem_device == torch.device("cpu")
    with gpumem.track() as m:
        a = torch.ones(1000, device=gpumem_device)
        tmp = torch.ones(500, device=gpumem_device)
        del tmp
    assert m.peak_bytes == 6000
    assert m.leaked_bytes == 4000
    assert m.backend == "cpu"
"""
    )
    run_gpumem().assert_outcomes(passed=1)
    run_gpumem("--gpumem").assert_outcomes(passed=1)
