"""The simulated machine: builds, devices, the CUDA runtime, memory, streams, checkpoints."""
