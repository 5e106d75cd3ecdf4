"""Workload files: every number of a run as YAML a user edits, checked on load, and the same document in the manifest.

    format: 1
    max_model_len: 131072
    timing: {prefill_ms_per_1k_tokens: 40, ...}
    scenarios:              # the scenarios to generate, by name; a field left out takes its default
      scenario2: {sets: 50, concurrency: [10, 25, 50], ...}

The document is `Spec.to_dict()`; loading it back is pydantic (v2) validation of the scenarios' own spec dataclasses,
the tool inference-perf's config models use too: unknown keys refused, strict types (a quoted "40k" or 40.0 is not a
token count), the bounds their annotations declare (spec.py), and each spec's own checks (a range lo <= hi). A
failure is one line that names the YAML path and the value. pydantic is imported only here, when a workload is
loaded: generating from the built-in defaults does not pay for it.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

from .errors import WorkloadError
from .scenarios import Scenario, registered, scenario_named
from .spec import DEFAULT_MAX_MODEL_LEN, WORKLOAD_FORMAT, Spec, Timing, Window

__all__ = ["WORKLOADS_DIR", "SCHEMA_PATH", "load_workload", "parse_workload", "spec_from_document",
           "workload_yaml", "workload_schema", "shipped_workload", "default_workload", "resolve_workload"]

WORKLOADS_DIR = Path(__file__).parent / "data" / "workloads"
SCHEMA_PATH = Path(__file__).parent / "data" / "workload.schema.json"
_MAX_BYTES = 256 * 1024  # a workload is a few KB: cap what is read, so a huge file is refused before parsing
_MAX_DEPTH = 8  # format > scenarios > name > field > {lo, hi}: anything deeper is not a workload
_HEADER = """\
# A fastgen workload (fastgen --workload FILE). Token budgets are in tokens of the tokenizer in use; fields ending in
# _ms are milliseconds, _s seconds; a range is {lo, hi}, both included, drawn uniformly. `scenarios` lists the
# scenarios to generate; a field left out takes the default of `fastgen workload show`. Schema: workload.schema.json.
"""


def _document_type(scenarios: tuple[Scenario, ...]):
    """The dataclass a workload document validates as: one optional entry per known scenario."""
    forbid = {"extra": "forbid"}
    entries = dataclasses.make_dataclass("Scenarios", [(s.name, Optional[s.spec_type], None) for s in scenarios],
                                         frozen=True, namespace={"__pydantic_config__": forbid})
    return dataclasses.make_dataclass("Workload", [
        ("scenarios", entries),
        ("format", int, WORKLOAD_FORMAT),
        ("max_model_len", Window, DEFAULT_MAX_MODEL_LEN),
        ("timing", Timing, dataclasses.field(default_factory=Timing)),
    ], frozen=True, namespace={"__pydantic_config__": forbid})


@lru_cache(maxsize=4)
def _adapter(scenarios: tuple[Scenario, ...]):
    from pydantic import TypeAdapter

    return TypeAdapter(_document_type(scenarios))


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "the document"


def _problem(error: dict) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "int_type":
        return "expected an integer"
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = ctx.get("ge", ctx.get("le"))
        return f"expected an integer {'>=' if kind == 'greater_than_equal' else '<='} {bound}"
    if kind in ("too_short",):
        return "expected at least one entry"
    if kind == "unexpected_keyword_argument":
        return "unknown key (fastgen workload show lists the keys)"
    if kind == "missing":
        return "missing"
    if kind in ("dataclass_type", "dataclass_exact_type", "model_type", "dict_type"):
        return "expected a mapping"
    if kind in ("tuple_type", "list_type"):
        return "expected a list"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"][:1].lower() + error["msg"][1:]


def _check_shape(doc: Any, source: str) -> None:
    if not isinstance(doc, dict):
        raise WorkloadError(f"{source}: a workload is a mapping with a `scenarios` key, got {type(doc).__name__}")
    fmt = doc.get("format", WORKLOAD_FORMAT)
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > WORKLOAD_FORMAT:
        raise WorkloadError(f"{source}: written by a newer fastgen (workload format {fmt}; this one reads "
                            f"{WORKLOAD_FORMAT}); upgrade fastgen")
    scenarios = doc.get("scenarios")
    if isinstance(scenarios, dict):
        unknown = [name for name in scenarios if name not in {s.name for s in registered()}]
        if unknown:
            raise WorkloadError(f"{source}: scenarios.{unknown[0]}: no such scenario; the known ones: "
                                f"{', '.join(s.name for s in registered())}")
        if not any(v is not None for v in scenarios.values()):
            raise WorkloadError(f"{source}: scenarios lists no scenario; name at least one "
                                f"({', '.join(s.name for s in registered())})")


def spec_from_document(doc: Any, *, source: str = "workload") -> Spec:
    """The Spec of a workload document (a parsed file, or a manifest's `workload`); WorkloadError if it is not one."""
    from pydantic import ValidationError as PydanticError

    _check_shape(doc, source)
    try:
        # JSON mode, strict: YAML lists are arrays (tuples take them), and no string or float passes for an int
        parsed = _adapter(registered()).validate_json(json.dumps(doc), strict=True)
    except PydanticError as exc:
        errors = exc.errors()
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        # a spec's own check (value_error) says what it got itself
        got = f", got {json.dumps(first['input'])}" if first["type"] not in ("missing", "value_error") else ""
        raise WorkloadError(f"{source}: {_where(first['loc'])}: {_problem(first)}{got}{more}") from None
    except (TypeError, ValueError) as exc:  # json.dumps of a YAML date or set
        raise WorkloadError(f"{source}: holds a value that is not a number, string, list or mapping ({exc})") from None
    chosen = {s.name: getattr(parsed.scenarios, s.name) for s in registered()}
    return Spec({name: sc for name, sc in chosen.items() if sc is not None}, parsed.timing, parsed.max_model_len)


def _depth(node: Any, level: int = 0) -> int:
    if isinstance(node, dict):
        return max([_depth(v, level + 1) for v in node.values()], default=level + 1)
    if isinstance(node, list):
        return max([_depth(v, level + 1) for v in node], default=level + 1)
    return level


def parse_workload(text: str, *, source: str) -> Spec:
    """A workload from YAML text. Anchors and aliases are refused (a workload needs none, and they make bombs)."""
    if len(text.encode()) > _MAX_BYTES:
        raise WorkloadError(f"{source}: {len(text.encode())} bytes is not a workload (at most {_MAX_BYTES}); "
                            f"start from `fastgen workload show`")
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                raise WorkloadError(f"{source}: line {mark.line + 1}, column {mark.column + 1}: anchors and aliases "
                                    f"are not allowed in a workload; write the values out")
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise WorkloadError(f"{source}: {where}not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if _depth(doc) > _MAX_DEPTH:
        raise WorkloadError(f"{source}: nested {_depth(doc)} levels deep; a workload has at most {_MAX_DEPTH}")
    return spec_from_document(doc, source=source)


def load_workload(path: Path) -> Spec:
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        raise WorkloadError(f"workload {path} does not exist; `fastgen workload show > my.yaml` writes one to edit") \
            from None
    except IsADirectoryError:
        raise WorkloadError(f"workload {path} is a folder; give a YAML file") from None
    except OSError as exc:
        raise WorkloadError(f"cannot read workload {path} ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkloadError(f"{path}: not UTF-8 text; a workload is a YAML file") from None
    return parse_workload(text, source=str(path))


def shipped_workload(name: str) -> Path:
    """One of the workloads that ship with fastgen (default, 32k, smoke)."""
    path = WORKLOADS_DIR / f"{name}.yaml"
    if not path.is_file():
        shipped = sorted(p.stem for p in WORKLOADS_DIR.glob("*.yaml"))
        raise WorkloadError(f"no shipped workload {name!r}; the shipped ones: {', '.join(shipped)}")
    return path


def default_workload() -> Spec:
    """The shipped default.yaml: the benchmark's numbers. When its text is what the built-in defaults print (a test
    holds the two equal), they are taken as they are, without validating the file again (0.15 s of a 3 s run)."""
    from .scenarios import default_spec

    path = shipped_workload("default")
    text = path.read_text(encoding="utf-8")
    spec = default_spec()
    return spec if text == workload_yaml(spec) else parse_workload(text, source=str(path))


def resolve_workload(name: str) -> Spec:
    """--workload NAME: a YAML file, or the name of a shipped workload (default, 32k, smoke) when no file has it."""
    path = Path(name)
    if not path.is_file() and "/" not in name and not name.endswith((".yaml", ".yml")):
        return default_workload() if name == "default" else load_workload(shipped_workload(name))
    return load_workload(path)


def workload_yaml(spec: Spec) -> str:
    """The workload as a YAML file (the header says the units), loadable back to the same spec."""
    body = yaml.safe_dump(json.loads(json.dumps(spec.to_dict())), sort_keys=False, default_flow_style=None,
                          width=118, allow_unicode=True)
    return _HEADER + body


def workload_schema() -> dict:
    """The JSON Schema of a workload document of the built-in scenarios, for editors and CI (committed as
    data/workload.schema.json)."""
    from .scenarios import BUILTIN

    schema = _adapter(BUILTIN).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "fastgen workload", **schema}
