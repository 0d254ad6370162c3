"""What the tests share, one module a concern; tests/conftest.py holds only the fixtures built on these.

ports: a free TCP port.  processes: a process alive or gone, waiting for a condition, a launcher's ranks.
launch: the real CLI and torchrun as a user starts them (forked_cli: the fork server behind them).
rows: ResultRows and run folders.  simhosts, simslurm, simmpi: simulated hosts, real Slurm and Open MPI on
them.  history_stores, history_runs, link_history: results stores and the runs recorded in them.
doctor_reports, png_files, races, replay_job, small_disk: one concern each, as named.
"""
