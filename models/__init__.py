"""Workloads: SNN training kernels (tilesim.models.snn), linear/butterfly layers (tilesim.models.linear)."""
