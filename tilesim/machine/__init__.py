"""Machines: their descriptions (presets), exchange fabrics and links, cost models, SRAM ledger."""
