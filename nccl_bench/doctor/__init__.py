"""`nccl-bench doctor` on ranks: its config (doctor_config.py), its pure planning and verdicts (schedule.py,
verdicts.py, roster.py), its body on the shared life cycle (doctor_body.py) and what it records and
reports (doctor_report.py). Placed as the sweep is in sweep/."""
