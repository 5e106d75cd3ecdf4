"""The generator: workload -> scenarios -> tokenizer -> content -> blocks -> plans -> spans -> files -> manifest.

Each stage is one module here; `fastgen` (the package door) exports what a program needs from them.
"""
