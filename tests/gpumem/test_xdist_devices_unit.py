"""Worker-to-GPU assignment rules for xdist runs."""

from __future__ import annotations

import pytest

from pytest_gpumem.devices import (
    DeviceConfigError,
    Pinning,
    parse_device_list,
    parse_memory_fraction,
    pick_device,
    worker_id,
    worker_index,
)


def test_worker_id_from_environment() -> None:
    assert worker_id({"PYTEST_XDIST_WORKER": "gw3"}) == "gw3"
    assert worker_id({}) == "main"
    assert worker_index("gw12") == 12
    assert worker_index("main") is None


def test_round_robin_over_visible_devices() -> None:
    picks = [pick_device(f"gw{i}", [], visible_count=3).device_index for i in range(7)]
    assert picks == [0, 1, 2, 0, 1, 2, 0]


def test_round_robin_over_chosen_devices() -> None:
    picks = [pick_device(f"gw{i}", [3, 1], visible_count=4).device_index for i in range(4)]
    assert picks == [3, 1, 3, 1]


def test_without_workers() -> None:
    assert pick_device("main", [], visible_count=2) == Pinning("main", None)
    assert pick_device("main", [1], visible_count=2) == Pinning("main", 1)
    assert pick_device("gw1", [], visible_count=0) == Pinning("gw1", None)  # CPU backend


def test_unknown_device_is_an_error() -> None:
    with pytest.raises(DeviceConfigError, match="only 2 CUDA device"):
        pick_device("gw0", [0, 5], visible_count=2)


@pytest.mark.parametrize("text", ["", "0,,1", "a", "-1", "0;1"])
def test_bad_device_list(text: str) -> None:
    with pytest.raises(DeviceConfigError, match="comma-separated"):
        parse_device_list(text)


def test_device_list_and_fraction() -> None:
    assert parse_device_list(" 0, 2 ") == [0, 2]
    assert parse_memory_fraction("0.45") == 0.45
    assert parse_memory_fraction("1") == 1.0
    for bad in ("0", "1.5", "half", "-0.2"):
        with pytest.raises(DeviceConfigError, match=r"\(0, 1\]"):
            parse_memory_fraction(bad)


def test_pin_device_calls_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA calls a pinned worker makes, recorded by a stand-in for torch.cuda."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from pytest_gpumem.gate import GateSettings, pin_device

    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("set_device", i)))
    monkeypatch.setattr(
        torch.cuda,
        "set_per_process_memory_fraction",
        lambda f, i: calls.append(("fraction", (f, i))),
    )
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    worker = SimpleNamespace(workerinput={"workerid": "gw3"})
    settings = GateSettings(memory_fraction=0.4)
    assert pin_device(worker, "auto", settings) == 1  # type: ignore[arg-type]
    assert calls == [("set_device", 1), ("fraction", (0.4, 1))]
    calls.clear()
    assert pin_device(worker, "cpu", settings) is None  # type: ignore[arg-type]
    assert calls == []
    chosen = GateSettings(devices=(1, 0))
    assert pin_device(worker, "cuda", chosen) == 0  # type: ignore[arg-type]
