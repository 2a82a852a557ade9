"""The SNN kernels (Numba), the spike lists they read and write, and their dense NumPy twin."""
