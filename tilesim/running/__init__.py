"""How commands run on this computer: sweeps and their store, up-front limits, progress bars, memos and
lazily loaded names."""
