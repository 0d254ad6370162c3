"""A finished run of a command on ranks (sweep, doctor, replay) recorded in the history: where
(`--history`, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite) and how long to wait for it
(--history-wait), decided before the run so a bad URL fails at once; then the record, which never fails
the run. Prints nothing but the wait's note: the CLI says what the outcome says.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nccl_bench.errors import UserInputError, first_line
from nccl_bench.history.address import (
    DEFAULT_WAIT_S,
    ENV_VAR,
    SQLITE,
    AddressError,
    StoreAddress,
    default_address,
    parse_address,
)
from nccl_bench.options import HISTORY, RESULTS_ROOT
from nccl_bench.units.clock import utc_now_iso


def store_address(history: str | None, results_root: Path | None, wait_s: float | None = None) -> StoreAddress:
    """--history, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite; parsed once, here."""
    wait = DEFAULT_WAIT_S if wait_s is None else wait_s
    given = history if history is not None else os.environ.get(ENV_VAR) or None
    if given is None:
        root = RESULTS_ROOT.read_default() if results_root is None else RESULTS_ROOT.read(results_root)
        return default_address(root, wait)
    try:
        return parse_address(given, wait)
    except AddressError as exc:
        raise UserInputError(HISTORY.name if history is not None else ENV_VAR, str(exc)) from None


def recording_target(history: str | None, no_history: bool, results_root: Path | None,
                     wait_s: float | None = None) -> StoreAddress | None:
    """Where sweep or doctor will record its run (None: --no-history): a bad URL fails before the run."""
    return None if no_history else store_address(history, results_root, wait_s)


@dataclass(frozen=True)
class Recorded:
    """How recording a finished run went: in the history at `address`, or not (`failure` says why)."""

    run_dir: Path
    address: StoreAddress
    failure: str | None = None
    run_id: str | None = None  # the run's id in the history, once recorded


def record_run(run_dir: Path, address: StoreAddress, say: Callable[[str], None] | None = None) -> Recorded:
    """Record a finished run (rank 0, or the process that started local workers). A history that cannot
    be reached loses nothing: the run folder is whole, and the outcome says why it was not recorded.
    `say` hears that a wait for the history goes on."""
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import open_store

    try:
        record = read_record(run_dir, str(run_dir), utc_now_iso())
        with open_store(address, say) as store:
            store.add_run(record)
    except Exception as exc:  # whatever the store or its driver raised, the run is kept
        return Recorded(run_dir, address, first_line(exc))
    return Recorded(run_dir, address, run_id=record.run_id)


def add_later(run_dir: Path, address: StoreAddress) -> str:
    """The command that adds the run to the same history later (a server's URL left for the user to give:
    its password is never printed)."""
    where = shlex.quote(address.target) if address.kind == SQLITE else "URL"
    return f"nccl-bench history add {shlex.quote(str(run_dir))} {HISTORY.name} {where}"
