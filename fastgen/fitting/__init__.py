"""A workload fitted to measured traffic: the generator's side of `fastgen workload fit`. It reads traffic through the
read side (fastgen/traffic/) and writes a workload the generator runs, so it sits above both wings; traffic/ stays
pure read side."""
