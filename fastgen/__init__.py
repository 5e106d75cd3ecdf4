"""fastgen: token-exact, graph-exact, reproducible KV-cache benchmark traces for inference-perf.

This module is the one door: everything a program needs is imported from here; the modules behind it are the
pipeline's stages (workload -> scenarios -> tokenizer -> content -> blocks -> plans -> spans -> files -> manifest),
then the runs against a live server (bakeoff) and their comparison (results).

The names are loaded on first use (PEP 562), so `import fastgen` and the command's start-up stay cheap: the command
imports numpy, tokenizers and the generator only inside its error handling, where Ctrl-C is one line, not a traceback.
"""

from importlib import import_module

from .version import __version__ as __version__  # re-exported: __all__ is built at run time

# public name -> the module that defines it
_EXPORTS = {
    "FastgenError": "errors",
    "OutputError": "errors",
    "SpecError": "errors",
    "TokenizerError": "errors",
    "ValidationError": "errors",
    "WorkloadError": "errors",
    "ServerError": "errors",
    "MissingExtraError": "errors",
    "Scenario": "generator.scenarios",
    "default_spec": "generator.scenarios",
    "register": "generator.scenarios",
    "load_workload": "generator.workload",
    "resolve_workload": "generator.workload",
    "workload_yaml": "generator.workload",
    "ConfigOptions": "generator.configs",
    "RunOptions": "generator.output",
    "generate": "generator.output",
    "Spec": "generator.spec",
    "Timing": "generator.spec",
    "Tokenizer": "formats.tokenizer",
    "load_tokenizer": "formats.tokenizer",
    "check_file": "dataset_validation",
    "validate_tree": "dataset_validation",
    "unpack_tree": "verify",
    "verify_tree": "verify",
    "BakeoffOptions": "bakeoff",
    "run_bakeoff": "dataset_bakeoff",
    "AnalysisOptions": "analysis",
    "analyze": "analysis",
    "config_targets": "analysis",
    "CompareOptions": "results",
    "compare_runs": "results",
    "recorded_ceilings": "predicted",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fastgen' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # once: later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
