"""What agent work costs, and the budget that stops it: a thread-safe tally the run hands to
its runtime. Each agent invocation is recorded (tokens, cost, session id, transcript) through a
sink — the journal in a real run — and `check()` refuses to start more work once the spent
total reaches the budget. The refusal is a `BudgetReached` halt: the run stops resumable, and a
later `looprail run --budget-usd <more>` continues where it stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable

from looprail.errors import BudgetReached


class Meter:
    def __init__(
        self,
        *,
        run_id: str | None = None,
        budget_usd: float | None = None,
        spent_usd: float = 0.0,
        sink: Callable[[dict[str, object]], None] | None = None,
    ) -> None:
        if budget_usd is not None and not budget_usd > 0:
            raise ValueError(f"budget_usd must be positive, got {budget_usd}")
        self.run_id = run_id
        self.budget_usd = budget_usd
        self._spent = float(spent_usd)
        self._sink = sink
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent

    def check(self) -> None:
        """Raise `BudgetReached` when the spent total has reached the budget."""
        if self.budget_usd is None:
            return
        spent = self.spent_usd
        if spent >= self.budget_usd:
            raise BudgetReached(
                f"budget reached: ${spent:.4f} spent of --budget-usd {self.budget_usd:g}; "
                "run again with a higher --budget-usd to continue"
            )

    def record(self, call: dict[str, object]) -> None:
        """Tally one invocation (`costUsd` may be None) and hand it to the sink."""
        cost = call.get("costUsd")
        with self._lock:
            if isinstance(cost, (int, float)):
                self._spent += float(cost)
        if self._sink is not None:
            self._sink(call)
