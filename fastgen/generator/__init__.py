"""The generator: workload -> scenarios -> content -> blocks -> plans -> spans -> files -> manifest.

Each stage is one module here; the formats it writes (trace bytes, manifest, dataset file, the configs' dialect) and
the tokenizer it counts with live in fastgen.formats, below it and the read side alike. `fastgen` (the package door)
exports what a program needs from them.
"""
