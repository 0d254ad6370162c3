"""Turning rows into something to read: rich tables, plots, the --format outputs, compare
exports, the limits view. Returns text or renderables; the CLI prints them."""
