"""A secret checkpoint answer on the Dask executor: it reaches the next executor call of its
plan on the worker, in `$LOOPRAIL_CHECKPOINT_ANSWER`, and nothing else (not the later call, not
a file under `.looprail/`, not the output); a scheduler reached over plain TCP is refused it
(one line, the run halts and a resume loses nothing).

The plan and its executor are the checkpoint end-to-end tests' (`tests/e2e/test_checkpoints.py`):
the executor logs, per call, the sha256 of the variable (never its value) into the project."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.e2e.test_checkpoints import SECRET, answers, assert_nowhere, project_with, requests
from tests.machine.test_dask_executor import journal_tasks
from tests.support import run_cli

distributed = pytest.importorskip("distributed")
pytest.importorskip("cryptography")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def calls(project: Path) -> dict[str, str | None]:
    """Each executor call's task → the sha256 of the secret it saw (None: not set)."""
    return {r["task"]: r["secret"] for r in requests(project)}


def run_on(project: Path, executor: str, *extra: str):
    return run_cli(
        "run", str(project), "--phase", "1", "--executor", executor, *extra, subprocess=True
    )


def assert_not_shown(secret: str, *outputs: str) -> None:
    for text in outputs:
        assert secret not in text


def test_a_secret_reaches_the_workers_next_call_only(tmp_path):
    """T1 runs on the worker, the checkpoint T2 is answered with a secret (`--answer`), T3 (a
    later step of the same worker run) gets it and T4 does not."""
    project = project_with(tmp_path, SECRET, after=2)
    secret = "sk-dask-SECRETv4lue-0123456789"
    done = run_on(project, "dask-local:1", "--answer", f"01-01/T2={secret}")
    assert done.returncode == 0, done.stderr
    assert "ran on tls://" in done.stderr  # the calls ran on the cluster's worker
    assert calls(project) == {
        "01-01/T1": None,
        "01-01/T3": digest(secret),  # the next executor call, in its env, on the worker
        "01-01/T4": None,  # and no other
    }
    (a,) = answers(project)
    assert (a.outcome, a.message) == ("withheld", "answer withheld")
    assert_nowhere(project, secret)
    assert_not_shown(secret, done.stdout, done.stderr.replace(f"01-01/T2={secret}", ""))


def test_a_secret_is_refused_a_plain_tcp_scheduler_and_kept_for_the_resume(tmp_path):
    """`dask://HOST:PORT` is plain TCP: the call that would get the secret is not sent (one
    line, exit 1, the task never started); the secret `looprail answer` keeps for the run
    stays, and the run resumed on a TLS cluster hands it to that call, then removes it."""
    from distributed import LocalCluster

    from looprail.machine.answers import secret_path

    project = project_with(tmp_path, SECRET, after=2)
    secret = "tok-dask-ABCDEF-987654321"
    assert run_cli("run", str(project), "--phase", "1", subprocess=True).returncode == 3
    given = run_cli("answer", str(project), "01-01/T2", input=secret + "\n", subprocess=True)
    assert given.returncode == 0, given.stderr
    kept = secret_path(project, answers(project)[0].run_id, "01-01/T2")
    assert kept.exists()
    with LocalCluster(
        n_workers=1,
        processes=True,
        threads_per_worker=1,
        host="127.0.0.1",
        protocol="tcp://",
        dashboard_address=None,
        silence_logs=40,
    ) as cluster:
        address = cluster.scheduler.address
        assert address.startswith("tcp://127.0.0.1:")
        refused = run_cli(
            "run",
            str(project),
            "--phase",
            "1",
            "--executor",
            f"dask://{address.removeprefix('tcp://')}",
            env={k: None for k in os.environ if k.startswith("DASK_")},
            subprocess=True,
        )
    assert refused.returncode == 1, refused.stderr
    assert "Traceback" not in refused.stderr
    (line,) = [ln for ln in refused.stderr.splitlines() if "unencrypted" in ln]
    assert "01-01/T3" in line and "secret" in line and address in line
    assert list(calls(project)) == ["01-01/T1"]  # T3 was never sent anywhere
    assert journal_tasks(project)["01-01/T3"] == ("pending", 0)  # nor journaled started
    assert kept.exists()  # nothing lost
    resumed = run_on(project, "dask-local:1")
    assert resumed.returncode == 0, resumed.stderr
    assert calls(project) == {"01-01/T1": None, "01-01/T3": digest(secret), "01-01/T4": None}
    assert journal_tasks(project)["01-01/T3"] == ("done", 1)  # the refusal was no attempt
    assert not kept.exists()  # removed once used
    assert_nowhere(project, secret)
    assert_not_shown(secret, refused.stdout, refused.stderr, resumed.stdout, resumed.stderr)
