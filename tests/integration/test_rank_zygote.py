"""A rank that a forked command starts through torch's agent is forked from the command's zygote
(tests/helpers/rank_zygote.py) and is, to itself and to the agent, what a fresh `python -u -m` is.

Each case runs tests/helpers/zygote_probe.py twice: forked from a server (its child forked from the
zygote) and as a fresh interpreter (its child a fresh one too), and the two must agree on everything
but process ids: the exit code the agent's Popen sees, what the child wrote and when, its argv, folder,
environment, session and parent, and that its exit handlers ran. Both run without PYTHONUNBUFFERED, so
that only `-u` (or the zygote's copy of it) makes the child's output reach its file at once.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.helpers.forked_cli import ForkServer, run_fresh
from tests.helpers.launch import REPO, worker_env
from tests.helpers.zygote_probe import CHILD_ENV_VAR, CHILD_LINE

pytestmark = [pytest.mark.integration]

PROBE = "tests.helpers.zygote_probe"
ENDINGS = {"return": 0, "exit-3": 3, "exit-text": 1, "raise": 1, "interrupt": -signal.SIGINT}
SEEN_ALIKE = ("cwd", "probe", "main", "unbuffered")


def _env(child_env: dict[str, str] | None = None) -> dict[str, str]:
    env = worker_env({CHILD_ENV_VAR: json.dumps(child_env or {})})
    env.pop("PYTHONUNBUFFERED", None)
    return env


@pytest.fixture(scope="module")
def server():
    started = ForkServer(_env(), REPO)
    yield started
    started.close()


def _forked(server: ForkServer):
    return lambda argv, cwd, env, module: server.run(module, argv, cwd, env, None, 120)


def _probe(folder, ending: str, start, child_env: dict[str, str] | None = None) -> tuple[dict, dict, str, list[str]]:
    """(what the command said, what the child saw, the child's stdout, its stderr less traceback frames)."""
    folder.mkdir()
    done = start([ending, str(folder / "facts.json")], cwd=REPO, env=_env(child_env), module=PROBE)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    seen = json.loads((folder / "facts.json").read_text())
    err = [line for line in (folder / "child.err").read_text().splitlines() if not line.startswith((" ", "Traceback"))]
    return said, seen, (folder / "child.out").read_text(), err


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_forked_rank_ends_and_sees_what_a_fresh_interpreter_does(server, tmp_path, ending):
    said, seen, out, err = _probe(tmp_path / "forked", ending, _forked(server))
    fresh_said, fresh_seen, fresh_out, fresh_err = _probe(tmp_path / "fresh", ending, run_fresh)
    assert (seen["forked"], fresh_seen["forked"]) == (True, False)  # the zygote started the first only
    assert said["code"] == fresh_said["code"] == ENDINGS[ending]
    assert seen["ppid"] == said["command"] and seen["sid"] == seen["pid"] == said["pid"]
    for facts, folder in ((seen, tmp_path / "forked"), (fresh_seen, tmp_path / "fresh")):
        assert facts["tempdir"] == str(folder)  # TMPDIR from the agent's environment, read afresh
        assert facts["argv"] == ["child", ending, str(folder / "facts.json")]
    alike = {key: seen[key] for key in SEEN_ALIKE}
    assert alike == {key: fresh_seen[key] for key in SEEN_ALIKE}
    assert alike == {"cwd": str(REPO), "probe": "set by the agent", "main": "__main__", "unbuffered": True}
    assert out == fresh_out == CHILD_LINE
    assert err == fresh_err and err[-1] == "exit handlers ran", (err, fresh_err)


def test_a_rank_whose_environment_differs_where_an_interpreter_starts_is_a_fresh_one(server, tmp_path):
    """PYTHON*, LD_* and c10's log level are read as an interpreter starts: a fork would not see them."""
    said, seen, out, err = _probe(tmp_path / "forked", "exit-3", _forked(server), {"PYTHONHASHSEED": "7"})
    assert (seen["forked"], said["code"], out, err[-1]) == (False, 3, CHILD_LINE, "exit handlers ran")
    assert seen["ppid"] == said["command"]
