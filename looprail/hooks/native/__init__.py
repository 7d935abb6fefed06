"""Native hooks: hooks a user writes in `hooks.json`, with owned Actions (docs/native-hooks.md).

hooks = load_native_hooks(project, trusted=is_trusted)      # never raises for a bad file
engine = NativeHookEngine(hooks, run_id=run_id)               # one per run (loop guard)
evaluation = engine.evaluate("task_call", task_candidate(...))
if evaluation.blocked: ...                                     # frozen before any Action
engine.deliver(evaluation.effects, sink)                       # best-effort
"""

from looprail.hooks.native.actions import (
    ActionRequest,
    Compact,
    EmitCustomEvent,
    Interrupt,
    Message,
    OwnedAction,
    Shutdown,
)
from looprail.hooks.native.document import hooks_json_schema
from looprail.hooks.native.engine import (
    DeliveryRecord,
    Effect,
    EffectSink,
    EventEvaluation,
    NativeHookEngine,
    NativeHookResult,
    ReportRow,
)
from looprail.hooks.native.events import (
    EVENT_NAMES,
    EVENTS,
    loop_settled_candidate,
    point_candidate,
    task_candidate,
)
from looprail.hooks.native.loading import global_hooks_path, load_native_hooks, project_hooks_path
from looprail.hooks.native.models import HooksFile, NativeHook, NativeHookSet, Preset
from looprail.hooks.native.parsing import read_hooks_file

__all__ = [
    "EVENTS",
    "EVENT_NAMES",
    "ActionRequest",
    "Compact",
    "DeliveryRecord",
    "Effect",
    "EffectSink",
    "EmitCustomEvent",
    "EventEvaluation",
    "HooksFile",
    "Interrupt",
    "Message",
    "NativeHook",
    "NativeHookEngine",
    "NativeHookResult",
    "NativeHookSet",
    "OwnedAction",
    "Preset",
    "ReportRow",
    "Shutdown",
    "global_hooks_path",
    "hooks_json_schema",
    "load_native_hooks",
    "loop_settled_candidate",
    "point_candidate",
    "project_hooks_path",
    "read_hooks_file",
    "task_candidate",
]
