"""The history page's time axis: labels at round times, as many as their width allows, never overlapping
and never outside the figure, whatever the runs' spacing (Chromium measures the drawn boxes in
tests/integration/test_history_page.py; here each label's box is its length times CHAR_PX, the bound)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import pytest

from nccl_bench.render import history_page

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _labels(moments: list[datetime]) -> list[tuple[float, str, str]]:
    times = [moment.timestamp() for moment in moments]
    low, high = min(times), max(times)
    plot_w = history_page.WIDTH - history_page.LEFT - history_page.RIGHT

    def x_of(t: float) -> float:
        return history_page.LEFT + (t - low) / ((high - low) or 1.0) * plot_w

    return history_page._time_labels(low, high, x_of, [moment.isoformat() for moment in moments])


def _box(x: float, text: str, anchor: str) -> tuple[float, float]:
    width = len(text) * history_page.CHAR_PX
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, left + width


@pytest.mark.parametrize("moments", [
    [START + timedelta(minutes=minute) for minute in range(2000)],  # a run a minute
    [START + timedelta(days=day) for day in range(2000)],  # five years of daily runs
    [START + timedelta(days=day) for day in range(20)] + [START + timedelta(days=19, minutes=m) for m in range(21)],
    [START, START + timedelta(seconds=20)],  # shorter than the finest step
    [START + timedelta(days=day) for day in range(7)],
], ids=["minutes", "years", "burst", "seconds", "week"])
def test_time_labels_stand_apart_inside_the_figure(moments):
    boxes = sorted(_box(*label) for label in _labels(moments))
    assert boxes
    assert all(left >= 0 and right <= history_page.WIDTH for left, right in boxes)
    assert all(after[0] >= before[1] for before, after in itertools.pairwise(boxes))


def test_a_week_of_daily_runs_is_labelled_by_date_from_its_first_day_to_its_last():
    """The last day's label, kept inside the figure, leaves no room for the one before it."""
    assert [text for _, text, _ in _labels([START + timedelta(days=day) for day in range(7)])] == [
        "2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05", "2026-01-07"]


def test_runs_within_a_day_are_labelled_with_their_time():
    assert [text for _, text, _ in _labels([START + timedelta(hours=hour) for hour in range(7)])][:2] == [
        "01-01 00:00", "01-01 01:00"]
