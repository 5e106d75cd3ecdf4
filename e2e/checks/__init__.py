"""Checks that do not trust fastgen: what inference-perf reported against what a server saw (replayed.py, over
reports.py and traces.py), and whether a dataset reads as what it says (realism.py)."""
