"""Without a launcher: check what can be checked here, make the run folder, start local ranks.

One path for every command that runs on ranks. The folder is made here, so a bad path fails before
any worker starts; a Ctrl-C/SIGTERM or a failure ends in one line; a folder nothing was written to is
removed again. The process that started local workers speaks for the run; the workers stay quiet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from nccl_bench.cli import messages
from nccl_bench.cli.option_sets import WORKERS
from nccl_bench.errors import EXIT_INTERRUPTED, RunFailedError
from nccl_bench.options import OUT, RESULTS_ROOT
from nccl_bench.ranks.faults import Interrupted, hold_signals, interrupts_unwrapped, signals_raise_interrupted
from nccl_bench.ranks.launch import VARIANT_ENV, default_workers, run_local_workers, shared_cores_note
from nccl_bench.ranks.run_owner import new_claimant
from nccl_bench.results.run_folder import claim_run_dir, read_meta, release_run_dir
from nccl_bench.units.nccl_env import Variant, label


def start(what: str, workers: Optional[int], refuse_early: Callable[[int], tuple[str, list[str]]], args: list[str],
          out: Optional[Path], default_target: Path, variants: Sequence[Variant] = ((),)) -> Path:
    """Run `nccl-bench ARGS` in `workers` local ranks (None: one per GPU, or 2 on CPU); the run folder.

    refuse_early(workers) raises what the ranks would refuse, before any starts, and returns the backend
    the ranks will use and notes to say. variants: the environment of each set of ranks, started one
    after the other into the one run folder (--nccl-env: NCCL reads its variables once per process).
    """
    why = None
    if workers is None:
        workers, why = default_workers()
    backend, notes = refuse_early(workers)
    notes = [*notes, *shared_cores_note(workers, backend)]
    return _run(what, workers, why, args, out, default_target, notes, variants)


def _run(what: str, workers: int, why: Optional[str], args: list[str], out: Optional[Path], default_target: Path,
         notes: list[str], variants: Sequence[Variant]) -> Path:
    target = out if out is not None else default_target
    made = out is None or not target.exists()
    claimant = new_claimant()  # the workers' rank 0 takes the folder with it; another run is refused
    run_dir = None
    # With --nccl-env, meta.json says how the last variant to start ended: the run's ending only once
    # the last variant has started (its label, as the ranks record it, is meta.json's "variant").
    final = {"variant": label(variants[-1]), "started": False}
    # From the folder on, a signal is an Interrupted here too (torch's agent installs its own while it runs).
    with signals_raise_interrupted():
        try:
            with interrupts_unwrapped():  # the except clauses below must see an Interrupted as itself
                if out is None:
                    run_dir = claim_run_dir(target, RESULTS_ROOT.key, claimant, numbered=True)
                    args = [*args, OUT.name, str(run_dir)]
                else:
                    run_dir = claim_run_dir(target, OUT.key, claimant)
                if why is not None:
                    messages.say(f"no launcher found; starting {why} (use {WORKERS.name} N to choose)")
                messages.notes(notes)
                for number, variant in enumerate(variants, 1):
                    order = {VARIANT_ENV: f"{number}/{len(variants)}"} if variant else {}
                    final["started"] = number == len(variants)
                    run_local_workers(workers, args, claimant, env={**dict(variant), **order})
        except Interrupted as exc:
            hold_signals()  # a second Ctrl-C must not cut this report short
            meta = None if run_dir is None else read_meta(run_dir)
            if _completed(meta, final):  # the signal came after the ending: the run is what meta.json says
                messages.say(f"note: {exc} arrived after the {what} had completed; nothing was lost")
                return run_dir
            if meta is None:
                release_run_dir(run_dir, made)
                messages.fail(f"interrupted by {exc} before the {what} began; nothing was measured", EXIT_INTERRUPTED)
            kept = f"the {meta['rows']} row(s) measured so far are" if "rows" in meta else "what was measured so far is"
            messages.fail(f"interrupted by {exc}; {kept} kept in {run_dir}", EXIT_INTERRUPTED)
        except RunFailedError as exc:
            if not exc.quiet and run_dir is not None and _completed(read_meta(run_dir), final):
                # no rank reported: one ended after the run
                messages.say(f"note: {exc} after the {what} had completed; its results are whole")
                return run_dir
            release_run_dir(run_dir, made)
            exc.run_dir = run_dir
            raise
    return run_dir


def _completed(meta, final: dict) -> bool:
    """meta.json says the whole run completed: the last variant (the only one without --nccl-env) did."""
    return (meta is not None and meta.get("status") == "complete" and final["started"]
            and meta.get("variant", "") == final["variant"])

