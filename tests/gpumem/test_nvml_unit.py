"""NVML device view: parsing and fallbacks, against a fake of the pynvml module."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from pytest_gpumem.nvml import NvmlUnavailable, NvmlView, import_pynvml, nvml_device_key
from tests.gpumem import fake_pynvml

GiB = 2**30


def configure(monkeypatch: pytest.MonkeyPatch, **state: Any) -> None:
    monkeypatch.setenv("FAKE_PYNVML", json.dumps(state))


def device(processes: Any, used: int = 6 * GiB, uuid: str = "GPU-aaa") -> dict[str, Any]:
    return {"uuid": uuid, "total": 16 * GiB, "used": used, "processes": processes}


def open_view(index: int = 0, env: dict[str, str] | None = None) -> NvmlView:
    return NvmlView.open(index, env=env or {}, nvml=fake_pynvml)


def test_own_process_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device([[1, GiB], ["self", 3 * GiB]])])
    reading = open_view().read()
    assert (reading.used_bytes, reading.scope, reading.note) == (3 * GiB, "process", "")
    assert reading.total_bytes == 16 * GiB


def test_host_pids_in_a_container_fall_back_to_device(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device([[987654, 2 * GiB], [987655, GiB]])])
    reading = open_view().read()
    assert (reading.used_bytes, reading.scope) == (6 * GiB, "device")
    assert "host PIDs" in reading.note and "2 PIDs" in reading.note


def test_empty_process_list_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device([], used=GiB)])
    reading = open_view().read()
    assert (reading.used_bytes, reading.scope) == (GiB, "device")
    assert "no compute processes" in reading.note


def test_unsupported_process_query_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device("unsupported")])
    reading = open_view().read()
    assert reading.scope == "device" and "Not Supported" in reading.note


def test_missing_per_process_figure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device([["self", None]])])
    reading = open_view().read()
    assert reading.scope == "device" and "does not report per-process" in reading.note


def test_visible_devices_map_to_nvml_numbering(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(
        monkeypatch,
        devices=[
            device([["self", 1]], uuid="GPU-0"),
            device([["self", 2]], uuid="GPU-1"),
            device([["self", 3]], uuid="GPU-2"),
        ],
    )
    assert open_view(1, {"CUDA_VISIBLE_DEVICES": "2,0"}).read().used_bytes == 1
    assert open_view(0, {"CUDA_VISIBLE_DEVICES": "GPU-1"}).read().used_bytes == 2
    assert open_view(2).read().used_bytes == 3
    assert nvml_device_key(0, "") == 0
    with pytest.raises(NvmlUnavailable, match="not among CUDA_VISIBLE_DEVICES"):
        nvml_device_key(1, "3")


def test_missing_driver_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, library=False)
    with pytest.raises(NvmlUnavailable) as info:
        open_view()
    assert "NVML Shared Library Not Found" in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    configure(monkeypatch, devices=[device([])])
    with pytest.raises(NvmlUnavailable, match="no GPU 3"):
        open_view(3)


def test_missing_library_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes 'import pynvml' fail
    with pytest.raises(NvmlUnavailable, match="pip install nvidia-ml-py"):
        import_pynvml()


def test_real_pynvml_without_driver_is_one_line() -> None:
    pytest.importorskip("pynvml")
    try:
        view = NvmlView.open(0)
    except NvmlUnavailable as exc:
        assert "\n" not in str(exc)
    else:  # a machine with a driver: a reading must come back
        assert view.read().total_bytes > 0
        view.close()
