"""Placement: neuron -> (chip, tile) mappings."""
