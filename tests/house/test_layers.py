"""The import graph follows the pipeline: no module of fastgen imports one above it (function-level imports count)."""

from __future__ import annotations

import ast
from pathlib import Path

import fastgen

ROOT = Path(fastgen.__file__).parent

# Bottom to top; a module may import modules of its own layer and the layers below. A new module gets a row here.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "version", "interrupts", "processes", "engine_endpoints"),
    ("extras",),  # optional dependencies, named as such when missing
    # the formats: the contracts on disk, below both the generator that writes them and the read side
    ("formats.atomic", "formats.pre_token_count", "formats.chat_template"),
    ("formats.tokenizer",),
    ("formats.rows", "formats.compression", "formats.config_dialect"),  # rows: a trace directory's session-per-row file
    ("formats.config_document",),  # the inference-perf config document: read and changed here only
    ("formats.manifest",),
    ("formats.writer", "formats.outdir"),  # outdir: output folders staged and placed whole
    ("formats.run_folder",),  # a bakeoff run folder's layout: its names, and the walk that finds runs
    ("formats.run_record",),  # a bakeoff run folder's run.json: one writer, one reader
    ("formats",),
    ("generator.spec", "generator.streams"),
    ("generator.timeline",),  # each phase's end on one clock: any step of a run marks it
    ("generator.model_match",),
    (
        "generator.content",
        "generator.content.english",
        "generator.content.vocab",
        "generator.content.variation",
        "generator.content.kinds",
        "generator.content.compose",
        "generator.content.budget",
        "generator.content.patch",
        "generator.content.agent_plan",
        "generator.content.pytest_log",
        "generator.content.notes",
    ),
    ("generator.pool_cache",),  # prepared pools kept between runs: below the dataset that reads them
    ("generator.tools",),
    ("generator.messages",),
    ("generator.prompt_tokens",),
    ("generator.shared_blocks",),
    (
        "generator.scenarios.base",
        "generator.scenarios.common",
        "generator.scenarios.scenario1",
        "generator.scenarios.scenario2",
        "generator.scenarios.scenario3",
        "generator.scenarios.agent_loop",
        "generator.scenarios.steps",
        "generator.scenarios.chain",
        "generator.scenarios.fan",
        "generator.scenarios.chat",
        "generator.scenarios",
    ),
    ("generator.workload",),
    ("generator.expectations",),  # what a written dataset's workload says it must look like, for the read side
    ("generator.spans", "generator.native"),
    ("generator.dataset",),
    ("generator.configs",),
    ("generator.workers",),
    ("generator.plan_from",),  # a run's plan, given or read back from a manifest, and its tokenizer checked
    ("generator.output", "generator"),  # the whole run, and the generator's folder
    # the read side: trace files as inference-perf reads them (validate uses it too)
    ("traces.graph",),
    ("traces.requests",),
    ("traces.blocks", "traces"),
    ("traffic.mooncake",),  # Mooncake lines, their sessions inferred from hash-id chains
    ("traffic.logged",),  # the request every reader gives, and what the agents' logs give of a call
    ("traffic.claude_code", "traffic.codex"),  # the agents' own logs
    ("traffic.agent_logs",),  # which files are agents' logs, read as requests
    ("traffic.read",),  # traffic as measured from trace files: counts, times, shapes, prefix sharing
    ("traffic.stats", "traffic"),
    # fitting: the generator's side of `workload fit`, above both wings (it reads traffic and writes a workload)
    ("fitting.fit",),  # the agent workload fitted to traffic: pure
    ("fitting.chat_fit",),  # the chat workload fitted to traffic without tool calls, with fit.py's helpers: pure
    ("fitting.fitted", "fitting"),  # a fitted workload checked against the window and generated at a small scale
    ("verify", "validate"),
    ("dataset_validation",),  # validate handed the shapes a dataset's workload plans: above both wings
    ("export.start_barrier", "export.pods"),  # the Kubernetes pods' common start (stdlib only), and their spec
    ("bakeoff.shards",),
    (
        "bakeoff.capacity_search",
    ),  # the SLO as data and the search for the largest load meeting it: pure  # one config's replay split for several load generators: below the bakeoff that runs them
    # bakeoff: runs against a live server; results reads the run folders it writes
    ("bakeoff.server", "bakeoff.sampler", "bakeoff.runs", "bakeoff.plan", "bakeoff.status", "bakeoff.inference_perf"),
    ("bakeoff.scheduling",),
    ("bakeoff.identity", "bakeoff.reset", "bakeoff.preflight"),
    ("bakeoff.fleet",),  # an engine behind a router: its replicas reset, verified and sampled one by one
    ("bakeoff.runner", "bakeoff"),
    ("export.kubernetes",),  # a config's shards as an Indexed Job: above the bakeoff whose shards it runs
    ("results.runs",),
    ("results.ceilings",),
    ("results.stats",),
    ("results.inference",),  # the decision rule: when a B/A is a difference
    ("results.prompts",),  # were both sides sent the same prompts (or the same plus a constant)
    ("results.report",),
    (
        "results.sections.common",
        "results.sections.scenario1",
        "results.sections.scenario2",
        "results.sections.scenario3",
        "results.sections.throughput",
        "results.sections.overview",
        "results.sections.setup",
        "results.sections.prompts",
        "results.sections.steady",
        "results.sections.summary",
        "results.sections.answers",
        "results.sections.slo",
        "results.sections.replicas",
        "results.sections",
    ),
    ("results.written",),  # what compare wrote, so it never overwrites a user's file
    ("results.render", "results.plots", "results.compare", "results"),
    ("analysis.rules",),  # each engine's scheduling and cache rules: data only
    ("analysis.secant",),  # the one-speed solver calibrate fits with: pure arithmetic
    ("analysis.cache", "analysis.aiperf", "analysis.sharing", "analysis.step_time"),
    ("analysis.engine_base",),  # one replica, stepping: the mechanics both engine models share
    ("analysis.engine_vllm", "analysis.engine_sglang"),  # each engine's scheduler
    ("analysis.engine_models",),  # which model a replica runs
    ("analysis.routing",),  # replicas behind a router
    ("analysis.schedule",),  # the client: inference-perf's replay order
    ("analysis.corpus", "analysis.side_by_side", "analysis.serving"),
    ("analysis.analyze",),
    ("analysis.calibrate", "analysis.summary", "analysis.report", "analysis.plots", "analysis"),
    ("analysis.capacity_predict",),  # the capacity under an SLO, predicted: the bakeoff's search on the model
    ("analysis.request",),  # what an analysis is asked: its targets, tokenizer, server and options, checked
    ("export.jsonl", "export.arrivals"),
    ("export.mooncake", "export.dag", "export.mooncake_sessions", "export"),
    ("predicted",),  # compare's own analyze: the results read side calling the analysis at what the runs recorded
    # the bakeoff handed the outputs check a dataset's workload asks for: above both wings
    ("dataset_bakeoff",),
    ("capacity_bakeoff",),  # the capacity search run step by step by the bakeoff, judged by the report's figures
    ("cli.options", "cli.generate", "cli.workload", "cli.datasets", "cli.runs", "cli.analysis"),
    ("cli.export",),
    ("cli", "__main__", ""),  # "" is the package door, fastgen/__init__.py
]
LAYER = {name: depth for depth, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The fastgen modules a file imports, as names relative to the package."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = [*base, *(node.module.split(".") if node.module else [])]
            if node.module is None:  # from . import a, b: each is a module of the package
                found |= {".".join([*target, alias.name]) for alias in node.names}
            else:
                found.add(".".join(target))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fastgen"):
            found.add(node.module.removeprefix("fastgen").lstrip("."))
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("fastgen").lstrip(".") for a in node.names if a.name.startswith("fastgen")}
    return {f for f in found if f != name}


def _with_doors(name: str, imported: set[str]) -> set[str]:
    """The imports of module `name` with the package doors they run: importing `a.b.c` first runs `a/__init__.py` and
    `a/b/__init__.py`, so a door that imports upward closes a circle at import time. Its own packages' doors are
    already running when the module is imported: they add nothing."""
    own = name.split(".")
    found = set(imported)
    for target in imported:
        parts = target.split(".")
        for end in range(1, len(parts)):
            if parts[:end] != own[:end]:
                found.add(".".join(parts[:end]))
    return found


def _modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_every_module_has_a_layer():
    assert sorted(_module_name(p) for p in _modules() if _module_name(p) not in LAYER) == []


def test_no_module_imports_one_above_it_in_the_pipeline():
    upward = []
    for path in _modules():
        name = _module_name(path)
        for target in sorted(_with_doors(name, _imports(path))):
            # `from .scenarios import x` may name a module or a symbol of the package: either is the package's layer
            layer = LAYER.get(target, LAYER.get(target.rsplit(".", 1)[0] if "." in target else target))
            assert layer is not None, f"{name} imports {target!r}, which has no layer"
            if layer > LAYER[name]:
                upward.append(f"{name} (layer {LAYER[name]}) imports {target} (layer {layer})")
    assert upward == []


def test_the_layer_check_sees_the_package_doors_an_import_runs():
    # bakeoff.runner importing export.shards ran export/__init__.py, whose exporters import the analysis above the
    # bakeoff: a circle no module-to-module edge showed
    assert _with_doors("bakeoff.runner", {"export.shards"}) == {"export.shards", "export"}
    assert _with_doors("export.kubernetes", {"bakeoff.shards", "export.pods"}) == {
        "bakeoff.shards",
        "bakeoff",
        "export.pods",
    }
    assert _with_doors("generator.scenarios.scenario1", {"generator.scenarios.base"}) == {"generator.scenarios.base"}


def test_the_layer_check_sees_relative_and_function_level_imports():
    # the checker itself: the bakeoff command imports the bakeoff inside a function, two levels of relative
    # import resolve
    assert "dataset_bakeoff" in _imports(ROOT / "cli" / "runs.py")
    assert {"generator.spec", "generator.streams", "generator.scenarios.base"} <= _imports(
        ROOT / "generator" / "scenarios" / "scenario1.py"
    )


# The wings: the formats (the contracts on disk) sit below both sides; the read side reads what the generator wrote
# through them and never imports the generator (docs/architecture.md, the wings: the read side works on any OTel
# corpus inference-perf reads). Fitting a workload to traffic and generating it is the generator's side: fastgen/fitting/.
FORMATS = ("formats",)
GENERATOR = ("generator",)
READ_SIDE = (
    "traces",
    "traffic",
    "verify",
    "validate",
    "bakeoff",
    "results",
    "analysis",
    "export",
    "predicted",
)


def _within(name: str, wings: tuple[str, ...]) -> bool:
    return any(name == wing or name.startswith(f"{wing}.") for wing in wings)


def _import_graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in _modules()}


def _reaches(graph: dict[str, set[str]], *, sources: tuple[str, ...], targets: tuple[str, ...]) -> set[tuple[str, str]]:
    """(module, imported) for each import from a module of `sources` into a module of `targets`."""
    return {
        (name, target)
        for name, imported in graph.items()
        if _within(name, sources)
        for target in imported
        if _within(target, targets)
    }


def test_read_side_imports_no_generator():
    # what the read side needs of the plans (validate's shapes, the bakeoff's outputs check) is handed in by the
    # layers above both wings: dataset_validation.py and dataset_bakeoff.py
    assert _reaches(_import_graph(), sources=READ_SIDE, targets=GENERATOR) == set()


def test_formats_import_neither_the_generator_nor_the_read_side():
    assert _reaches(_import_graph(), sources=FORMATS, targets=GENERATOR + READ_SIDE) == set()


def test_the_wing_rule_fails_on_a_read_side_module_importing_the_generator():
    # the rule on a crafted graph: a read-side module reaching a generator module (the package door included) is
    # named; formats, the generator reaching formats, and a read-side name that only starts alike are not
    graph = {
        "analysis.corpus": {"formats.rows", "generator.spec"},
        "results.runs": {"generator"},
        "generator.output": {"formats.writer"},
        "formats.manifest": {"formats.compression"},
        "tracesx": {"generator.spec"},
        "fitting.fit": {"generator.workload", "traffic.read"},
        "traffic.shapes": {"generator.workload"},  # any module of traffic/ is the read side: no exception
    }
    assert _reaches(graph, sources=READ_SIDE, targets=GENERATOR) == {
        ("analysis.corpus", "generator.spec"),
        ("results.runs", "generator"),
        ("traffic.shapes", "generator.workload"),
    }
    assert _reaches({"formats.rows": {"analysis.cache"}}, sources=FORMATS, targets=GENERATOR + READ_SIDE) == {
        ("formats.rows", "analysis.cache")
    }


def _import_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or round a loop (function-level imports count); a package's
    door (its __init__) importing its own modules is not a loop of theirs."""
    names = {_module_name(p) for p in _modules()}
    graph: dict[str, set[str]] = {}
    for path in _modules():
        name = _module_name(path)
        resolved = {t if t in names else t.rsplit(".", 1)[0] for t in _with_doors(name, _imports(path))}
        # a module reaching its own package's door reaches nothing of its own through it
        graph[name] = {t for t in resolved if t in names and not name.startswith(f"{t}.") and t != ""}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_no_modules_import_each_other():
    assert _import_cycles() == []
