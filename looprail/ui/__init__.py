"""`looprail ui` (docs/ui.md): a local web dashboard that follows a project's runs live from the
journal, opened read-only (`looprail.ui.server.create_app`). Needs the optional `ui` extra."""
