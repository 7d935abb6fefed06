"""Where a gate is evaluated: its check (`checks`), the predicates a check may name
(`predicates`) and the ledger a gate may read (`ledger`). Import from the defining module."""
