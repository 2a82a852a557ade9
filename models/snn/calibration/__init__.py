"""Calibration of the SNN cost model against measured step times (data beside it)."""
