"""Workloads: SNN training kernels (models.snn), linear/butterfly layers (models.linear)."""
