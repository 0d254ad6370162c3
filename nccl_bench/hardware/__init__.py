"""What the hardware promises: NVML, nvidia-smi parsers, a table of known GPUs, host probes
(memory copy, NIC rates), combined by `detect` into the peak busbw a run is compared with."""
