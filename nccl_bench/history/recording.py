"""A finished sweep or doctor run recorded in the history: where (`--history`, else $NCCL_BENCH_HISTORY,
else <results-root>/history.sqlite), decided before the run so a bad URL fails at once; then the
record, which never fails the run. Prints nothing: the CLI says what the outcome says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nccl_bench.errors import UserInputError, first_line
from nccl_bench.history.address import ENV_VAR, AddressError, StoreAddress, default_address, parse_address
from nccl_bench.options import HISTORY, RESULTS_ROOT
from nccl_bench.units.clock import utc_now_iso


def store_address(history: str | None, results_root: Path | None) -> StoreAddress:
    """--history, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite; parsed once, here."""
    given = history if history is not None else os.environ.get(ENV_VAR) or None
    if given is None:
        return default_address(RESULTS_ROOT.read_default() if results_root is None else RESULTS_ROOT.read(results_root))
    try:
        return parse_address(given)
    except AddressError as exc:
        raise UserInputError(HISTORY.name if history is not None else ENV_VAR, str(exc)) from None


def recording_target(history: str | None, no_history: bool, results_root: Path | None) -> StoreAddress | None:
    """Where sweep or doctor will record its run (None: --no-history): a bad URL fails before the run."""
    return None if no_history else store_address(history, results_root)


@dataclass(frozen=True)
class Recorded:
    """How recording a finished run went: in the history at `address`, or not (`failure` says why)."""

    run_dir: Path
    address: StoreAddress
    failure: str | None = None


def record_run(run_dir: Path, address: StoreAddress) -> Recorded:
    """Record a finished run (rank 0, or the process that started local workers). A history that cannot
    be reached loses nothing: the run folder is whole, and the outcome says why it was not recorded."""
    from nccl_bench.history.records import read_record
    from nccl_bench.history.store import open_store

    try:
        record = read_record(run_dir, str(run_dir), utc_now_iso())
        with open_store(address) as store:
            store.add_run(record)
    except Exception as exc:  # whatever the store or its driver raised, the run is kept
        return Recorded(run_dir, address, first_line(exc))
    return Recorded(run_dir, address)
