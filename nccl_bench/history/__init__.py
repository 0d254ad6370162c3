"""`nccl-bench history`: every sweep and doctor run kept in one history (SQLite or PostgreSQL),
each result in the series it is comparable with, the latest of each series judged against its history."""
