"""The CPU backend's storage tracker against sizes computed by hand."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_gpumem.backends.cpu import EventHistory, StorageTracker  # noqa: E402


def _peak_of(fn, round_bytes: int = 1) -> tuple[int, StorageTracker]:  # type: ignore[no-untyped-def]
    tracker = StorageTracker(round_bytes=round_bytes)
    with tracker:
        tracker.open_window()
        fn()
        result = tracker.close_window()
    return result.peak_bytes, tracker


@pytest.mark.parametrize(("round_bytes", "expected"), [(1, 8000), (512, 8192)])
def test_peak_is_exactly_one_tensors_bytes(round_bytes: int, expected: int) -> None:
    kept = []
    peak, tracker = _peak_of(
        lambda: kept.append(torch.empty(1000, dtype=torch.float64)), round_bytes
    )
    assert kept[0].untyped_storage().nbytes() == 8000
    assert peak == expected
    assert tracker.current == expected


def test_in_place_view_and_out_results_count_once() -> None:
    def body() -> None:
        a = torch.ones(1000)  # 4000 B, the only new storage
        a.add_(1)
        a.view(10, 100).mul_(2)
        torch.add(a, a, out=a)
        a.t_() if a.dim() == 2 else a.unsqueeze(0)

    peak, tracker = _peak_of(body)
    assert peak == 4000
    assert tracker.current == 0


def test_transient_is_peak_but_not_live() -> None:
    def body() -> None:
        for _ in range(3):
            tmp = torch.ones(250, 1000)
            del tmp

    peak, tracker = _peak_of(body)
    assert peak == 1_000_000
    assert tracker.current == 0


def test_resize_of_a_tracked_storage_is_followed() -> None:
    kept = []

    def body() -> None:
        a = torch.empty(0)
        torch.add(torch.ones(100), 1, out=a)  # out= resizes a from 0 to 400 bytes
        kept.append(a)

    peak, tracker = _peak_of(body)
    assert peak == 400 + 400  # the ones() input and the resized output
    assert tracker.current == 400


def test_paused_allocations_are_not_tracked() -> None:
    kept = []
    tracker = StorageTracker()
    with tracker:
        tracker.pause()
        kept.append(torch.ones(100))
        tracker.resume()
        kept.append(torch.ones(10))
    assert tracker.current == 40


def test_sites_are_user_frames() -> None:
    kept = []

    def make() -> None:
        kept.append(torch.nn.functional.relu(torch.ones(256)))

    tracker = StorageTracker()
    with tracker:
        tracker.open_window()
        make()
        result = tracker.close_window()
    (site,) = result.sites
    assert site.nbytes == 2048 and site.count == 2  # ones() and relu() both in make()
    filename, _, function = site.frames[0]
    assert filename == __file__ and function == "make"
    assert [f[2] for f in site.frames[:2]] == ["make", "test_sites_are_user_frames"]
    assert not any("/torch/" in f[0] for f in site.frames)


def test_survivors_report_graph_holders() -> None:
    kept = []
    tracker = StorageTracker()
    with tracker:
        w = torch.ones(64, requires_grad=True)
        kept.append((w * w).sum())  # holds the graph, which saves w
    leak = tracker.survivors()
    assert leak.graph_tensors == 1
    assert leak.leaked_bytes == 64 * 4 + 4
    tracker.forget()


def _mlp_step_peak(round_bytes: int) -> tuple[int, int]:
    torch.manual_seed(0)
    batch, widths = 64, (512, 1024, 1024, 10)
    model = torch.nn.Sequential(
        torch.nn.Linear(widths[0], widths[1]),
        torch.nn.ReLU(),
        torch.nn.Linear(widths[1], widths[2]),
        torch.nn.ReLU(),
        torch.nn.Linear(widths[2], widths[3]),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(batch, widths[0]), torch.randint(0, widths[3], (batch,))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    step()  # warm-up: the measured step starts with gradients of the previous one freed
    peak, tracker = _peak_of(step, round_bytes)
    tracker.forget()
    # Analytic: the backward peak is at the first layer's backward, when every gradient
    # exists (all parameters' bytes) and one batch x 1024 activation gradient is alive.
    params = sum(p.numel() * 4 for p in model.parameters())
    analytic = params + batch * widths[1] * 4
    return peak, analytic


def test_mlp_training_step_matches_analytic_peak() -> None:
    peak, analytic = _mlp_step_peak(1)
    # The loss and its incoming gradient, two fp32 scalars, are alive at that moment too.
    assert peak - analytic == 2 * 4


def test_mlp_training_step_rounded_to_allocator_blocks() -> None:
    peak, analytic = _mlp_step_peak(512)
    # Every tensor alive at the peak is rounded up on its own; the scalars take 512 B each.
    assert peak >= analytic and peak % 512 == 0
    assert peak - analytic < 512 * 8


def test_event_history_follows_live_bytes_and_marks_the_body() -> None:
    tracker = StorageTracker(history=EventHistory())
    with tracker:
        kept = torch.ones(100)  # 400 B before the body
        tracker.open_window()
        tmp = torch.ones(1000)  # 4000 B
        del tmp
        tracker.close_window()
    assert tracker.history is not None
    events, values = tracker.history.points(tracker.current)
    assert values == [0, 400, 4400, 400]
    assert events == [0, 1, 2, 3]
    assert tracker.history.marks == [(1, "body starts"), (3, "body ends")]
    assert kept.numel() == 100


def test_event_history_stays_bounded_and_keeps_the_peak() -> None:
    history = EventHistory(limit=64)
    for i in range(10_000):
        history.record(i % 50 + (1_000 if i == 7_777 else 0))
    events, values = history.points(current=9_999 % 50)
    assert len(values) <= 64 + 1
    assert max(values) == 1_000 + 7_777 % 50 and min(values[1:]) == 0
    assert events == sorted(events) and events[-1] == 10_000
    assert values[-1] == 9_999 % 50  # ends at the present value, even if thinned away


def test_stack_depth_zero_keeps_no_frames_and_the_same_peak() -> None:
    """Depth 0 (the bench's "no sites" candidate) must not walk the stack at all; it used
    to walk up to the first user frame and keep it."""
    kept = []
    tracker = StorageTracker(stack_depth=0)
    with tracker:
        tracker.open_window()
        kept.append(torch.empty(1000, dtype=torch.float64))
        result = tracker.close_window()
    assert result.peak_bytes == 8000
    assert [site.frames for site in result.sites] == [()]


def test_results_on_storages_made_before_the_tracker_are_not_new() -> None:
    """A result whose storage an input holds is no allocation, also when the tracker never
    saw that storage made: in-place and ``out=`` results (the same tensor object), views and
    detached aliases (another tensor on it)."""
    a = torch.ones(1000)
    b = torch.ones(1000, requires_grad=True)
    tracker = StorageTracker()
    with tracker:
        tracker.open_window()
        a.add_(1)
        torch.mul(a, 2, out=a)
        a.view(10, 100).t().mul_(3)
        b.detach().zero_()
        b.data.unsqueeze(0).squeeze(0)
        a.split(500)
        result = tracker.close_window()
    assert result.peak_bytes == 0
    assert tracker.current == 0


def test_site_lines_are_the_allocating_lines() -> None:
    """Sites are recorded as instruction offsets and named when reported: the lines must be
    those the frames were at, for each of several allocations in one function."""
    import inspect

    kept = []
    tracker = StorageTracker()
    with tracker:
        tracker.open_window()
        first = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        kept.append(torch.ones(10))
        kept.append(
            torch.ones(20)
        )
        for n in (30, 40):
            kept.append(torch.ones(n))
        result = tracker.close_window()
    lines = {site.nbytes: site.frames[0][1] for site in result.sites}
    assert lines == {40: first, 80: first + 2, 280: first + 5}
