"""Workload files: every number of a run as YAML a user edits, checked on load, and the same document in the manifest.

    format: 1
    max_model_len: 131072
    timing: {prefill_ms_per_1k_tokens: 40, ...}
    scenarios:              # the scenarios to generate, by name; a field left out takes its default
      scenario2: {sets: 50, concurrency: [10, 25, 50], ...}

The document is `Spec.to_dict()`; loading it back is pydantic (v2) validation of the scenarios' own spec dataclasses,
the tool inference-perf's config models use too: unknown keys refused, strict types (a quoted "40k" or 40.0 is not a
token count), the bounds their annotations declare (spec.py), and each spec's own checks (a range lo <= hi). Each
failure is one line that names the YAML path, the value and the fix (an unknown key: the closest known one); a file
with several lists them all, up to ten. pydantic is imported only here, when a workload is loaded: generating from
the built-in defaults does not pay for it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from ..errors import WorkloadError
from .scenarios import Scenario, registered
from .spec import DEFAULT_MAX_MODEL_LEN, WORKLOAD_FORMAT, Delay, Spec, Timing, Window

__all__ = [
    "WORKLOADS_DIR",
    "SCHEMA_PATH",
    "load_workload",
    "parse_workload",
    "spec_from_document",
    "workload_yaml",
    "workload_schema",
    "shipped_workload",
    "default_workload",
    "resolve_workload",
]

WORKLOADS_DIR = Path(__file__).parents[1] / "data" / "workloads"
SCHEMA_PATH = Path(__file__).parents[1] / "data" / "workload.schema.json"
_MAX_BYTES = 256 * 1024  # a workload is a few KB: cap what is read, so a huge file is refused before parsing
_MAX_LISTED = 10  # a workload with more errors lists the first ten, then how many more
# scenarios > chain > steps > [i] > calls > [j] > result > tokens > {lo, hi} (a declared scenario, chain.py) is the
# deepest a workload goes: anything deeper is not one
_MAX_DEPTH = 9
_HEADER = """\
# A fastgen workload (fastgen --workload FILE). Token budgets are in tokens of the tokenizer in use; fields ending in
# _ms are milliseconds, _s seconds; a range is {lo, hi}, both included, drawn uniformly. `scenarios` lists the
# scenarios to generate; a field left out takes the default of `fastgen workload show`. Schema: workload.schema.json.
"""


@lru_cache(maxsize=4)
def _document_type(scenarios: tuple[Scenario, ...]):
    """The dataclass a workload document validates as: one optional entry per known scenario."""
    forbid = {"extra": "forbid"}
    entries = dataclasses.make_dataclass(
        "Scenarios",
        [(s.name, Optional[s.spec_type], None) for s in scenarios],
        frozen=True,
        namespace={"__pydantic_config__": forbid},
    )
    return dataclasses.make_dataclass(
        "Workload",
        [
            ("scenarios", entries),
            ("format", int, WORKLOAD_FORMAT),
            ("max_model_len", Window, DEFAULT_MAX_MODEL_LEN),
            ("timing", Timing, dataclasses.field(default_factory=Timing)),
        ],
        frozen=True,
        namespace={"__pydantic_config__": forbid},
    )


@lru_cache(maxsize=4)
def _adapter(scenarios: tuple[Scenario, ...]):
    from pydantic import TypeAdapter

    return TypeAdapter(_document_type(scenarios))


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "the document"


def _unwrapped(kind: Any) -> Any:
    """The dataclass inside Optional[...] or Annotated[...], or `kind` itself."""
    while typing.get_origin(kind) in (typing.Union, types.UnionType, typing.Annotated):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        kind = args[0]
    return kind


def _known_keys(loc: tuple) -> list[str]:
    """The keys the mapping at `loc` (a path of keys) may hold; [] where that is not a mapping fastgen knows."""
    kind = _document_type(registered())
    try:
        for part in loc:
            if isinstance(part, int):  # an entry of a list: tuple[X, ...] holds X
                kind = _unwrapped(typing.get_args(kind)[0])
            else:
                kind = _unwrapped(typing.get_type_hints(kind)[part])
    except (KeyError, NameError, TypeError, IndexError):
        return []
    return [f.name for f in dataclasses.fields(kind) if f.init] if dataclasses.is_dataclass(kind) else []


def _unknown_key(loc: tuple) -> str:
    known = _known_keys(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    what = "no such scenario" if loc[:1] == ("scenarios",) and len(loc) == 2 else "unknown key"
    if close:
        return f"{what}; did you mean '{close[0]}'?"
    return f"{what}; the known ones: {', '.join(known)}" if known else f"{what} (fastgen workload show lists the keys)"


def _problem(error: Mapping[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "int_type":
        return "expected an integer"
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = ctx.get("ge", ctx.get("le"))
        return f"expected an integer {'>=' if kind == 'greater_than_equal' else '<='} {bound}"
    if kind in ("too_short",):
        return "expected at least one entry"
    if kind == "unexpected_keyword_argument" and "form" in error:
        forms = "; ".join(
            f"{{{', '.join(_FORMS[name])}}}" for name in (error["form"], *sorted(set(_FORMS) - {error["form"]}))
        )
        return f"unknown key; this value takes one of {forms}"
    if kind == "unexpected_keyword_argument":
        return _unknown_key(error["loc"])
    if kind == "missing":
        return "missing; add it"
    if kind in ("dataclass_type", "dataclass_exact_type", "model_type", "dict_type"):
        return "expected a mapping"
    if kind in ("tuple_type", "list_type"):
        return "expected a list"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"][:1].lower() + error["msg"][1:]


def _error_line(error: Mapping[str, Any]) -> str:
    """`path: what is wrong (and the fix), got VALUE`; a spec's own check (value_error) says what it got itself."""
    shown = error["type"] not in ("missing", "value_error", "unexpected_keyword_argument")
    got = f", got {json.dumps(error['input'])}" if shown else ""
    return f"{_where(error['loc'])}: {_problem(error)}{got}"


def _document_order(doc: Any, loc: tuple) -> list[int]:
    """Where `loc` stands in the document as written: errors are listed top to bottom, a missing key last."""
    order, node = [], doc
    for part in loc:
        if isinstance(node, dict) and part in node:
            order.append(list(node).index(part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            order.append(part)
            node = node[part]
        else:
            order.append(len(node) if isinstance(node, (dict, list)) else 0)
            break
    return order


# The mappings a field may take one of (a Delay: {lo, hi} or {median, p90, cap}): pydantic reports a bad one against
# every form, each under the form's class name; the user wrote one form, so only that one's errors are theirs.
_FORMS = {kind.__name__: [f.name for f in dataclasses.fields(kind)] for kind in typing.get_args(Delay)}


def _meant_form(doc: Any, loc: tuple) -> tuple[Optional[int], Optional[str]]:
    """Where in `loc` a form's name stands, and the form the document's mapping there means (most keys in common)."""
    node = doc
    for i, part in enumerate(loc):
        if part in _FORMS and not (isinstance(node, dict) and part in node):
            keys = set(node) if isinstance(node, dict) else set()
            return i, max(sorted(_FORMS), key=lambda name: len(set(_FORMS[name]) & keys))
        node = node.get(part) if isinstance(node, dict) else node[part] if isinstance(node, list) else None
    return None, None


def _one_form(doc: Any, errors: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    kept = []
    for error in errors:
        at, meant = _meant_form(doc, tuple(error["loc"]))
        if at is None:
            kept.append(error)
        elif error["loc"][at] == meant:
            kept.append({**error, "loc": tuple(error["loc"][:at]) + tuple(error["loc"][at + 1 :]), "form": meant})
    return kept


def _errors_message(source: str, doc: Any, errors: Sequence[Mapping[str, Any]]) -> str:
    """One line for one error; for more, one line each (the first _MAX_LISTED), in the document's order."""
    errors = _one_form(doc, errors)
    if len(errors) == 1:
        return f"{source}: {_error_line(errors[0])}"
    ordered = sorted(errors, key=lambda e: _document_order(doc, e["loc"]))
    lines = [f"  {_error_line(e)}" for e in ordered[:_MAX_LISTED]]
    if len(errors) > _MAX_LISTED:
        lines.append(f"  and {len(errors) - _MAX_LISTED} more")
    return f"{source}: {len(errors)} problems:\n" + "\n".join(lines)


def _check_shape(doc: Any, source: str) -> None:
    if not isinstance(doc, dict):
        raise WorkloadError(f"{source}: a workload is a mapping with a `scenarios` key, got {type(doc).__name__}")
    fmt = doc.get("format", WORKLOAD_FORMAT)
    if isinstance(fmt, int) and not isinstance(fmt, bool) and fmt > WORKLOAD_FORMAT:
        raise WorkloadError(
            f"{source}: written by a newer fastgen (workload format {fmt}; this one reads "
            f"{WORKLOAD_FORMAT}); upgrade fastgen"
        )


def spec_from_document(doc: Any, *, source: str = "workload") -> Spec:
    """The Spec of a workload document (a parsed file, or a manifest's `workload`); WorkloadError if it is not one."""
    from pydantic import ValidationError as PydanticError

    _check_shape(doc, source)
    try:
        # JSON mode, strict: YAML lists are arrays (tuples take them), and no string or float passes for an int
        parsed = _adapter(registered()).validate_json(json.dumps(doc), strict=True)
    except PydanticError as exc:
        raise WorkloadError(_errors_message(source, doc, exc.errors())) from None
    except (TypeError, ValueError) as exc:  # json.dumps of a YAML date or set
        raise WorkloadError(f"{source}: holds a value that is not a number, string, list or mapping ({exc})") from None
    chosen = {s.name: getattr(parsed.scenarios, s.name) for s in registered()}
    if all(sc is None for sc in chosen.values()):
        raise WorkloadError(
            f"{source}: scenarios lists no scenario; name at least one ({', '.join(s.name for s in registered())})"
        )
    window_from = source if "max_model_len" in doc else ""
    return Spec(
        {name: sc for name, sc in chosen.items() if sc is not None},
        parsed.timing,
        parsed.max_model_len,
        window_from=window_from,
    )


def _depth(node: Any, level: int = 0) -> int:
    if isinstance(node, dict):
        return max([_depth(v, level + 1) for v in node.values()], default=level + 1)
    if isinstance(node, list):
        return max([_depth(v, level + 1) for v in node], default=level + 1)
    return level


def parse_workload(text: str, *, source: str) -> Spec:
    """A workload from YAML text. Anchors and aliases are refused (a workload needs none, and they make bombs)."""
    if len(text.encode()) > _MAX_BYTES:
        raise WorkloadError(
            f"{source}: {len(text.encode())} bytes is not a workload (at most {_MAX_BYTES}); "
            f"start from `fastgen workload show`"
        )
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
                raise WorkloadError(
                    f"{source}: {where}anchors and aliases are not allowed in a workload; write the values out"
                )
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
        raise WorkloadError(
            f"workload {path} does not exist; `fastgen workload show > my.yaml` writes one to edit"
        ) from None
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
    """One of the workloads that ship with fastgen (default, 32k, smoke, agent, declared, fleet, field)."""
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
    """--workload NAME: a YAML file, or the name of a shipped workload (default, 32k, smoke, agent, declared, fleet, field) when no file has it."""
    path = Path(name)
    if not path.is_file() and "/" not in name and not name.endswith((".yaml", ".yml")):
        return default_workload() if name == "default" else load_workload(shipped_workload(name))
    return load_workload(path)


def workload_yaml(spec: Spec) -> str:
    """The workload as a YAML file (the header says the units), loadable back to the same spec."""
    body = yaml.safe_dump(
        json.loads(json.dumps(spec.to_dict())), sort_keys=False, default_flow_style=None, width=118, allow_unicode=True
    )
    return _HEADER + body


def workload_schema() -> dict:
    """The JSON Schema of a workload document of the scenarios fastgen ships (the benchmark's three and the agent
    shapes, whose fields the shipped agent, declared, fleet and field workloads use), for editors and CI (committed
    as data/workload.schema.json)."""
    from .scenarios import BUILTIN, MORE

    schema = _adapter(BUILTIN + MORE).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "fastgen workload", **schema}
