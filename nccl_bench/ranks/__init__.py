"""Code that runs on every rank: launch layouts, the process group, the collectives registry,
the timing runner, the data check, fault handling and the sweep that ties them together."""
