"""The real agent CLIs (installed from npm by `.ci/run`), each with a fresh HOME pointed at the
scripted model server (`tests/support/model_server.py`).

`LOOPRAIL_AGENT_BIN` names the folder holding `claude`, `codex`, `opencode` and `gemini`
(default: `~/.cache/looprail-agents/node_modules/.bin`, where `.ci/run` installs them); a test
skips when its CLI is not there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from tests.support.model_server import MODEL, ModelServer

DEFAULT_BIN = Path.home() / ".cache" / "looprail-agents" / "node_modules" / ".bin"
KEY = "looprail-test-key"


def agent_bin() -> Path:
    return Path(os.environ.get("LOOPRAIL_AGENT_BIN") or DEFAULT_BIN)


def real_cli(name: str) -> Path | None:
    """The real CLI `name`, or None when it is not installed (gemini and codex also need node)."""
    path = agent_bin() / name
    if not path.exists() or not os.access(path, os.X_OK):
        return None
    if name in ("gemini", "codex") and shutil.which("node") is None:
        return None
    return path


def real_env(cli: str, root: Path, server: ModelServer, project: Path) -> dict[str, str]:
    """The whole environment of a looprail run whose agent is the real `cli`: a fresh HOME
    under `root` holding that CLI's configuration (its model is the scripted server, its
    retries off so a 401 or 429 fails at once), the CLIs first on PATH, a git identity."""
    home = root / f"home-{cli}"
    home.mkdir(parents=True, exist_ok=True)
    tmp = root / "tmp"
    tmp.mkdir(exist_ok=True)
    node = shutil.which("node")
    path = [str(agent_bin()), str(Path(sys.executable).parent)]
    path += [str(Path(node).parent)] if node else []
    path += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        "PATH": os.pathsep.join(path),
        "HOME": str(home),
        "TMPDIR": str(tmp),  # gemini files its error reports there
        "LANG": "C.UTF-8",
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "NO_COLOR": "1",
    }
    if cli == "claude":
        env.update(
            {
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": KEY,
                "ANTHROPIC_MODEL": MODEL,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
        )
    elif cli == "codex":
        (home / ".codex").mkdir(exist_ok=True)
        (home / ".codex" / "config.toml").write_text(
            f'model = "{MODEL}"\n'
            'model_provider = "looprail"\n'
            "[model_providers.looprail]\n"
            'name = "looprail"\n'
            f'base_url = "{server.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "LOOPRAIL_TEST_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        env["LOOPRAIL_TEST_KEY"] = KEY
    elif cli == "opencode":
        config = home / ".config" / "opencode"
        config.mkdir(parents=True, exist_ok=True)
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "looprail",
            "options": {"baseURL": f"{server.url}/v1", "apiKey": KEY},
            "models": {MODEL: {"name": MODEL}},
        }
        settings = {
            "model": f"looprail/{MODEL}",
            "autoupdate": False,
            "share": "disabled",
            "provider": {"looprail": provider},
        }
        (config / "opencode.json").write_text(json.dumps(settings))
        env.update(
            {
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                "OPENCODE_PURE": "1",  # no plugins: nothing to `npm install` into the HOME
            }
        )
    elif cli == "gemini":
        gemini = home / ".gemini"
        gemini.mkdir(exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": True, "maxAttempts": 1},
            "privacy": {"usageStatisticsEnabled": False},
            "model": {"name": MODEL},
        }
        (gemini / "settings.json").write_text(json.dumps(settings))
        # The project is trusted the way `gemini` records it when asked (worktrees are inside)
        (gemini / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
        env.update({"GEMINI_API_KEY": KEY, "GOOGLE_GEMINI_BASE_URL": server.url})
    return env
