"""The runnable suites (`python -m e2e.suites.NAME`), what runs inference-perf on one config (replay.py), and what
every suite's command line shares: its options, fastgen run as a user runs it, its end (runner.py)."""
