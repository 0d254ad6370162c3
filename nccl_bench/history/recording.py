"""A finished run of a command on ranks (sweep, doctor, replay) recorded in the history: where
(`--history`, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite) and how long to wait for it
(--history-wait), decided before the run so a bad URL fails at once; then the record, which never fails
the run. Prints nothing but the wait's note: the CLI says what the outcome says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from nccl_bench.errors import OptionError, StoreError, UserInputError, first_line
from nccl_bench.history.address import (
    DEFAULT_WAIT_S,
    ENV_VAR,
    AddressError,
    StoreAddress,
    default_address,
    parse_address,
)
from nccl_bench.units.clock import utc_now_iso
from nccl_bench.units.passwords import environment_secrets


def store_address(history: str | None, results_root: Path, wait_s: float = DEFAULT_WAIT_S) -> StoreAddress:
    """--history, else $NCCL_BENCH_HISTORY, else <results-root>/history.sqlite; parsed once, here."""
    given = history if history is not None else os.environ.get(ENV_VAR) or None
    if given is None:
        return default_address(Path(results_root), wait_s)
    try:
        address = parse_address(given, wait_s)
    except AddressError as exc:
        if history is not None:
            raise OptionError("history", str(exc)) from None
        raise UserInputError(ENV_VAR, str(exc)) from None
    return replace(address, secrets=address.secrets + environment_secrets(os.environ))


def recording_target(history: str | None, no_history: bool, results_root: Path,
                     wait_s: float = DEFAULT_WAIT_S) -> StoreAddress | None:
    """Where sweep or doctor will record its run (None: --no-history): a bad URL, or one libpq cannot read,
    fails before the run."""
    from nccl_bench.history.store import refuse_unreadable

    if no_history:
        return None
    address = store_address(history, results_root, wait_s)
    refuse_unreadable(address)
    return address


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
        said = first_line(exc)  # a StoreError is said without the password already; a driver's text is not
        return Recorded(run_dir, address, said if isinstance(exc, StoreError) else address.hide(said))
    return Recorded(run_dir, address, run_id=record.run_id)

