"""The fidelity corpus: programs with their outcome on a real CUDA host (see README.md here)."""
