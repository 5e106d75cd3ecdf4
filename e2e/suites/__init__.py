"""The runnable suites (`python -m e2e.suites.NAME`), and what runs inference-perf on one config (replay.py)."""
