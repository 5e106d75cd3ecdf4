"""Session plans: pure functions of (spec, seed, scenario, session index), each with its own RNG stream."""
