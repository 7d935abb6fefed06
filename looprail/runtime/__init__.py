"""Runtimes: where the loop's work (skills, agents, commands, checks, role work) is executed.

`base.Runtime` is the protocol the state machine calls; every runtime is a `base.BaseRuntime`
that implements one method, `handle`, and is found by name through the `looprail.runtimes`
entry points (`registry.create_runtime`). `local.LocalRuntime` (executables under `.looprail/`)
is the default, `scripted.ScriptedRuntime` serves tests, and the agent CLIs live in `agents`;
`executors` runs a wave's plans, `process` starts and bounds every child.

This package re-exports nothing: the hooks layer imports `base` and `process` for every check,
and the runtimes behind the other modules would add about 0.15 s of CPU to each of those
processes (a `render-hooks` call after a manifest edit among them). `looprail` exports
`Runtime`, `Outcome`, `LocalRuntime` and `ScriptedRuntime`.
"""
