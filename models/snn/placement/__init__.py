"""Placement of an SNN on tiles: the paper's contiguous placement, fitting one to a machine, searching
for a faster one, and the tile roles of each layer."""
