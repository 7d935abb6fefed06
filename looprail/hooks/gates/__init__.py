"""Where a gate is evaluated: a gate hook's check (`checks.evaluate_check`: the command, query
or predicate it names, and the verdict it gives), the predicates a check may name
(`predicates`) and the ledger a gate may read (`ledger`). The chart's own guards, pure
conditions on plan facts and hook results, are `machine/guards.py`.

Nothing is re-exported: import from the defining module.
"""
