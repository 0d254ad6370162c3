"""Pure arithmetic of a benchmark: the size grammar, bus-bandwidth factors, statistics. No torch."""
