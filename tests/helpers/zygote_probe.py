"""A command for test_rank_zygote: it starts one child through torch's agent's process handler, as
local workers and torchrun start ranks, and says what the child saw and how it ended.

`python -m tests.helpers.zygote_probe ENDING OUT`: the child (`... child ENDING OUT`) writes its facts
to OUT as JSON and ends by ENDING: `exit-3` (sys.exit(3)), `exit-text` (sys.exit("...")), `raise`,
`interrupt` (KeyboardInterrupt at the top), `return`. The command prints the child's exit code and pid,
and the child says whether it was forked (a fresh one has no torch imported). CHILD_ENV_VAR (JSON) adds
to the child's environment.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
from pathlib import Path

CHILD_LINE = "a line from the child, written before it ends"
CHILD_ENV_VAR = "ZYGOTE_PROBE_CHILD_ENV"


def _child(ending: str, out: Path) -> None:
    atexit.register(lambda: print("exit handlers ran", file=sys.stderr))
    facts = {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": sys.argv[1:],
             "cwd": os.getcwd(), "probe": os.environ.get("ZYGOTE_PROBE"), "tempdir": tempfile.gettempdir(),
             "main": __name__, "forked": "torch" in sys.modules}  # this module imports no torch
    sys.stdout.write(CHILD_LINE)  # no newline: only an unbuffered stream has it in the file at once
    facts["unbuffered"] = (out.parent / "child.out").read_text() == CHILD_LINE
    out.write_text(json.dumps(facts))
    if ending == "exit-3":
        sys.exit(3)
    if ending == "exit-text":
        sys.exit("the child's own words")
    if ending == "raise":
        raise ValueError("the child failed")
    if ending == "interrupt":
        raise KeyboardInterrupt


def _command(ending: str, out: Path) -> None:
    from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler

    folder = out.parent
    env = {"ZYGOTE_PROBE": "set by the agent", "TMPDIR": str(folder), **json.loads(os.environ[CHILD_ENV_VAR])}
    handler = subprocess_handler.SubprocessHandler(
        entrypoint=sys.executable, args=("-u", "-m", "tests.helpers.zygote_probe", "child", ending, str(out)),
        env=env, stdout=str(folder / "child.out"), stderr=str(folder / "child.err"), local_rank_id=0,
        numa_options=None)
    code = handler.proc.wait()
    print(json.dumps({"code": code, "pid": handler.proc.pid, "command": os.getpid()}))


if __name__ == "__main__":
    if sys.argv[1] == "child":
        _child(sys.argv[2], Path(sys.argv[3]))
    else:
        _command(sys.argv[1], Path(sys.argv[2]))
