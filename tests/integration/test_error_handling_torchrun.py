"""Under torchrun the ranks run with the error handling the tool documents (2), unless the user chose
one: torch's elastic agent gives every worker TORCH_NCCL_ASYNC_ERROR_HANDLING=1 when it has none, and
the rank tells that default from a user's 1 by the agent's own environment. A real torchrun, exec'd
as a user starts it (the agent's /proc environment is then the one it was started with)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.launch import worker_env

pytestmark = pytest.mark.integration

RANK_SCRIPT = """
import json, os
from nccl_bench.ranks import devices
print("SEEN " + json.dumps([os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING"),
                            devices.error_handling(os.environ, devices.agent_environ(os.environ))]))
"""


@pytest.mark.parametrize("user, seen, value, set_by", [
    (None, "1", "2", "nccl-bench"),  # torchrun's default 1 replaced
    ("1", "1", "1", "user"),  # the same 1, chosen by the user before torchrun: kept
    ("3", "3", "3", "user"),
])
def test_torchrun_error_handling_default_replaced_and_users_value_kept(tmp_path, user, seen, value, set_by):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    env = worker_env()
    env.pop("TORCH_NCCL_ASYNC_ERROR_HANDLING", None)
    env.pop("NCCL_ASYNC_ERROR_HANDLING", None)
    if user is not None:
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = user
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
                             str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    [line] = [line for line in result.stdout.splitlines() if line.startswith("SEEN ")]
    in_worker, decided = json.loads(line.removeprefix("SEEN "))
    assert in_worker == seen  # what torch's agent handed the worker
    assert (decided["value"], decided["set_by"]) == (value, set_by)
