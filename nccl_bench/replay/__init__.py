"""`nccl-bench replay`: a training job's own collectives, read from its profiler traces (docs/replay.md).

trace_events.py streams a trace's events, trace_vocabulary.py names what torch and NCCL wrote in ours,
trace_reader.py reads one rank's collectives and their time in the job, profile.py groups them.
"""
