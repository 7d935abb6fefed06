"""What agent work costs: a thread-safe tally of invocations, each handed to a sink (the
journal), and `check()`, a `BudgetReached` halt (resumable) once the spent total reaches the
budget."""

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
