"""`looprail ui`: a read-only local web dashboard of a project's runs.

The page shows the loop chart with the current run painted on it, the points with their hooks
in contract order, waves → plans → tasks with their logs, the history, and how to continue a
halted run. It follows a run live through server-sent events fed from the journal, which it
opens read-only. Needs the optional `ui` extra (Starlette, uvicorn); `looprail ui` without it
prints the command that adds it (`looprail.runtime.extras.install_command`).

    from looprail.ui.server import create_app
    app = create_app("path/to/project", ["path/to/capabilities"])
"""
