"""The one account of what a sealed batch's model calls may spend: a :class:`Budget` per cell under the
batch's own, held request by request.

The rule (docs/network.md, "How the cap is held"): before the gateway forwards a model request, the request
**reserves its worst case**, the most it could cost (every byte of its body an input token at the model's
dearest input rate, and its whole output limit at the output rate). It goes at once when that fits in what
is left of every budget above it (the cell's cap, the batch's ``--max-batch-usd``) beside what is spent and
what the requests in flight reserved. When it does not fit, requests are admitted **one at a time**: it waits
until nothing else of that budget is in flight and goes alone if any money is left; its answer settles the
account with what the upstream reports it cost. Once a budget is spent, its requests are refused. So an agent
loop is never refused while money remains, and requests together never spend more than the cap plus one
request's cost. An answer that cost more than its reservation (an upstream that bills more than the request
could) makes that budget admit one request at a time from then on.

The class holds no HTTP and no files: the gateway calls :meth:`Budget.hold` and :meth:`Hold.settle`, the
runner :meth:`Budget.charge` for what it spends besides the gateway (the rubric judge); it is the one place a
gateway on another node would ask, through the same three calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Budget", "BudgetSpent", "Hold"]

WAIT_STEP_S = 1.0
"""How often a waiting request checks whether it was given up (its cell closed, its client gone)."""


class BudgetSpent(Exception):
    """A request refused because a budget above it is spent (or closed)."""


class Budget:
    """A spend cap held request by request; ``parent``: the budget above (a cell's batch). ``cap_usd`` None:
    no cap at this level (the spend is still counted). Thread-safe; a tree of budgets shares one lock."""

    def __init__(
        self, cap_usd: float | None, *, spent_usd: float = 0.0, parent: Budget | None = None, name: str = ""
    ) -> None:
        self.cap_usd = cap_usd
        self.name = name
        self.parent = parent
        self._cond: threading.Condition = parent._cond if parent is not None else threading.Condition()
        self._spent = spent_usd
        self._reserved = 0.0
        self._in_flight = 0
        self._one_at_a_time = False
        self._closed = False

    # --- what the runner and the reports read -----------------------------------------------------------

    @property
    def spent_usd(self) -> float:
        with self._cond:
            return self._spent

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def charge(self, amount_usd: float) -> None:
        """Spend without a reservation (what the runner pays besides the gateway), at every level."""
        with self._cond:
            for level in self._chain():
                level._spent += amount_usd
            self._cond.notify_all()

    def close(self) -> None:
        """Admit nothing more: waiting and later requests are refused."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- the rule ----------------------------------------------------------------------------------------

    def _chain(self) -> list[Budget]:
        chain: list[Budget] = []
        level: Budget | None = self
        while level is not None:
            chain.append(level)
            level = level.parent
        return chain

    def _spent_reason(self) -> str | None:
        """Why no request of this budget may go (a level spent or closed), or None."""
        for level in self._chain():
            if level._closed:
                return f"{level.name or 'the budget'} is closed"
            if level.cap_usd is not None and level._spent >= level.cap_usd:
                return f"{level.name or 'the budget'} of ${level.cap_usd:g} is spent (${level._spent:.4f})"
        return None

    def _may_go(self, worst_usd: float) -> bool:
        """The request fits beside what is reserved, or goes alone, at every level."""
        for level in self._chain():
            if level.cap_usd is None:
                continue
            fits = not level._one_at_a_time and level._spent + level._reserved + worst_usd <= level.cap_usd
            if not fits and level._in_flight > 0:
                return False
        return True

    def hold(self, worst_usd: float, *, given_up: Callable[[], bool] = lambda: False) -> Hold:
        """Reserve ``worst_usd`` for one request, waiting for its turn when it must go alone; raise
        :class:`BudgetSpent` when a level is spent or closed (or ``given_up`` says the request was)."""
        with self._cond:
            while True:
                reason = self._spent_reason()
                if reason is not None:
                    raise BudgetSpent(reason)
                if self._may_go(worst_usd):
                    break
                if given_up():
                    raise BudgetSpent("the request was given up while it waited for its turn")
                self._cond.wait(WAIT_STEP_S)
            for level in self._chain():
                level._reserved += worst_usd
                level._in_flight += 1
            return Hold(self, worst_usd)

    def _settle(self, hold: Hold, cost_usd: float) -> None:
        with self._cond:
            for level in self._chain():
                level._reserved -= hold.worst_usd
                level._in_flight -= 1
                level._spent += cost_usd
                if cost_usd > hold.worst_usd * (1 + 1e-9) + 1e-12:
                    level._one_at_a_time = True
            self._cond.notify_all()


@dataclass
class Hold:
    """One admitted request's reservation; settled once, with its cost."""

    budget: Budget
    worst_usd: float
    cost_usd: float | None = None

    @property
    def settled(self) -> bool:
        return self.cost_usd is not None

    def settle(self, cost_usd: float) -> bool:
        """Charge the request's cost and free its reservation; False (and nothing charged) when it was settled
        already."""
        with self.budget._cond:
            if self.cost_usd is not None:
                return False
            self.cost_usd = cost_usd
        self.budget._settle(self, cost_usd)
        return True
