"""`nccl-bench sweep` on ranks: its config (sweep_config.py), its plan (plan.py), its body on the
shared life cycle (sweep_body.py), what it reports (sweep_report.py), its result rows (rows.py), and the
pure checks after it (baseline_check.py, busbw_floor.py). Placed as the doctor is in doctor/."""
