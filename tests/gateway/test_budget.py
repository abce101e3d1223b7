"""The budget rule of the model gateway (dokimi.gateway.budget): worst cases reserved, one at a time once they
do not fit, never more than the cap plus one request, and never a refusal while money remains."""

from __future__ import annotations

import random
import threading
import time

import pytest

from dokimi.gateway.budget import Budget, BudgetSpent


@pytest.mark.slow
def test_requests_that_fit_go_together_and_one_that_does_not_waits_to_go_alone() -> None:
    cell = Budget(1.0)
    a, b = cell.hold(0.4), cell.hold(0.4)  # 0.8 reserved: both fit
    went = threading.Event()

    def third() -> None:
        cell.hold(0.4).settle(0.3)
        went.set()

    waiter = threading.Thread(target=third)
    waiter.start()
    assert not went.wait(0.3)  # 0.8 + 0.4 > 1: it waits while others are in flight
    a.settle(0.3)
    assert not went.wait(0.3)  # spent 0.3 + reserved 0.4 + 0.4 > 1: still waits
    b.settle(0.3)
    waiter.join(5)
    assert went.is_set() and cell.spent_usd == pytest.approx(0.9)  # alone, since 0.9 < 1 remained
    cell.hold(0.4).settle(0.4)  # 0.9 < 1: an agent loop is never refused while money remains
    with pytest.raises(BudgetSpent, match=r"of \$1 is spent"):
        cell.hold(0.01)
    assert cell.spent_usd == pytest.approx(1.3)  # the cap and one request, at most


def test_the_batch_above_holds_requests_of_all_its_cells() -> None:
    batch = Budget(1.0, spent_usd=0.5, name="batch")
    one, two = Budget(1.0, parent=batch), Budget(1.0, parent=batch)
    held = one.hold(0.4)  # 0.5 + 0.4 fits the batch
    went = threading.Event()
    waiter = threading.Thread(target=lambda: (two.hold(0.4).settle(0.4), went.set()))
    waiter.start()
    assert not went.wait(0.3)  # the other cell's request must go alone at the batch's level
    held.settle(0.4)
    waiter.join(5)
    assert went.is_set() and batch.spent_usd == pytest.approx(1.3)
    with pytest.raises(BudgetSpent, match="batch"):
        one.hold(0.01)
    assert one.spent_usd == pytest.approx(0.4) and two.spent_usd == pytest.approx(0.4)


def test_an_answer_that_cost_more_than_its_reservation_makes_the_budget_go_one_at_a_time() -> None:
    cell = Budget(10.0)
    cell.hold(0.1).settle(0.5)  # the upstream billed more than the request could cost
    first = cell.hold(0.1)
    went = threading.Event()
    waiter = threading.Thread(target=lambda: (cell.hold(0.1).settle(0.1), went.set()))
    waiter.start()
    assert not went.wait(0.3)
    first.settle(0.1)
    waiter.join(5)
    assert went.is_set()


def test_closing_refuses_waiting_requests_and_a_hold_settles_once() -> None:
    cell = Budget(1.0)
    held = cell.hold(0.8)
    refused: list[str] = []

    def wait() -> None:
        try:
            cell.hold(0.8)
        except BudgetSpent as e:
            refused.append(str(e))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    cell.close()
    waiter.join(5)
    assert refused and "closed" in refused[0]
    assert held.settle(0.8) and not held.settle(5.0)
    assert cell.spent_usd == pytest.approx(0.8)


def test_many_concurrent_requests_never_spend_more_than_the_cap_and_one_request() -> None:
    """A property check under real threads: 60 requests of random worst cases, each costing between 0 and
    its worst case, on a $1 cell under a $1.5 batch shared with a second cell."""
    rng = random.Random(7)
    batch = Budget(1.5)
    cells = [Budget(1.0, parent=batch), Budget(1.0, parent=batch)]
    costs: list[float] = []
    lock = threading.Lock()

    def request(cell: Budget, worst: float, fraction: float) -> None:
        try:
            hold = cell.hold(worst)
        except BudgetSpent:
            return
        time.sleep(0.005)
        hold.settle(worst * fraction)
        with lock:
            costs.append(worst * fraction)

    threads = [
        threading.Thread(target=request, args=(cells[i % 2], rng.uniform(0.05, 0.6), rng.random()))
        for i in range(60)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert batch.spent_usd == pytest.approx(sum(costs))
    assert batch.spent_usd <= 1.5 + max(costs) + 1e-9
    assert all(c.spent_usd <= 1.0 + max(costs) + 1e-9 for c in cells)
