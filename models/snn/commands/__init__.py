"""The SNN's commands (run, sweep, scaling, map-search, grad) and the libraries behind them."""
