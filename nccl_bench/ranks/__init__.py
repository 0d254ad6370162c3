"""Code that runs on every rank, shared by every command on ranks: the run life cycle (session),
launch layouts, the process group, the preflight checks, the collectives registry, the timing runner,
the data check and fault handling. Each command's own body lives in its package (sweep/, doctor/)."""
