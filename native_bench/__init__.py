"""native_bench: dataset generation measured side by side in one run, reported as ratios.

Timings move with the machine, its load and its page cache, so the bench never asserts a time: it runs every
variant back to back on the same machine and reports each against the others (fastgen against the write floor,
the native generator against fastgen). See native_bench/README.md.

Modules: cli (options), bench (the sequence of variants), runner (the work inside each measured process),
launch (processes, scratch folders, sync), hashes (byte equality), metrics (throughputs and ratios),
report (table and JSON).
"""
