"""Seeded templates for each kind of text a coding agent sees: code, prose, plans, trees, docs, log lines
(diffs are written from real edits of shown files: patch.py).

Every unit obeys one rule that makes token counts additive (see compose.py): it ends with a newline and does not
start with whitespace or a newline. A unit is a whole, plausible piece (a function, a log section, a step),
so a composed block reads as the kind it claims to be.
"""

from __future__ import annotations

from typing import Callable

from .english import fix_articles, participle, plural, third_person
from .vocab import Vocab

__all__ = ["KINDS", "UNIT_MAKERS", "FILLER_MAKERS", "statement"]


def _indent(lines: list[str], n: int = 4) -> list[str]:
    pad = " " * n
    return [pad + line if line else line for line in lines]


def _expr(v: Vocab, *, method: bool = False, is_async: bool = False) -> str:
    """An expression; `self` only inside a method, `await` only inside a coroutine."""
    r = v.random()
    if r < 0.25:
        return f"{v.var_name()}.{v.func_name()}({v.var_name()})"
    if r < 0.45:
        owner = f"self._{v.noun()}" if method else v.var_name()
        return f"{owner}.get({v.var_name()!r}, {v.number(0, 100)})"
    if r < 0.6:
        item = v.name()
        return f"[{item}.{v.name()} for {item} in {v.name(plural(v.noun()))} if {item}.{v.name(v.adjective())}]"
    if r < 0.75:
        return f"{v.func_name()}({v.var_name()}, timeout={v.number(1, 120)})"
    if r < 0.82:
        return f"{v.var_name()} + {v.number(1, 64)} * len({v.var_name()})"
    if r < 0.9:
        return f"({v.var_name()}[{v.number(0, 4)}:{v.number(4, 32)}], {v.var_name()}.get({v.noun()!r}) or {{}})"
    call = f"{'self.' if method else ''}{v.func_name()}({v.var_name()}=..., retries={v.number(0, 5)})"
    return f"await {call}" if is_async else call


def _statement(v: Vocab, *, method: bool = False, is_async: bool = False) -> list[str]:
    r = v.random()
    scope = {"method": method, "is_async": is_async}
    if r < 0.27:
        return [f"{v.var_name()} = {_expr(v, **scope)}"]
    if r < 0.35:
        return [f"{v.var_name()}[{v.noun()!r}] = {v.var_name()}[{v.number(0, 8)}]"]
    if r < 0.5:
        return [
            f"if {v.var_name()} is None:",
            f'    raise {v.class_name()}(f"{v.noun()} {{{v.var_name()}}} not found")',
        ]
    if r < 0.62:
        item = v.name()
        return [f"for {item} in {_expr(v, **scope)}:", f"    {v.var_name()}.append({item}.{v.name()})"]
    if r < 0.72:
        level = v.pick(["debug", "info", "warning"])
        return [f'logger.{level}("{v.verb()} %s for %s", {v.var_name()}, {v.var_name()})']
    if r < 0.82:
        return [
            "try:",
            f"    {v.var_name()} = {_expr(v, **scope)}",
            f"except {v.class_name()} as exc:",
            f'    raise {v.class_name()}("{v.verb()} failed") from exc',
        ]
    if r < 0.9:
        return [
            f"# {v.verb().capitalize()} the {v.adjective()} {v.noun()} before the {v.noun()} is {participle(v.verb())}."
        ]
    return [f"return {_expr(v, **scope)}"]


def statement(v: Vocab) -> list[str]:
    """The lines of a statement that compiles anywhere in a plain function's body (no self, no await), is not only
    a comment, so it may stand alone in a block, and is not a return, which would end the block it is put in."""
    while True:
        lines = _statement(v)
        if not lines[0].startswith(("#", "return ")):
            return lines


def _parameters(v: Vocab, taken: set[str]) -> str:
    """Typed parameters with distinct names (a repeated name does not compile)."""
    out = []
    for _ in range(v.number(0, 4)):
        name = v.var_name()
        kind = v.pick(["int", "str", "bool", "float", "list[str]", "dict[str, int]", v.class_name()])
        if name not in taken:
            taken.add(name)
            out.append(f"{name}: {kind}")
    return ", ".join(out)


def make_code(v: Vocab) -> str:
    """A Python function or a small class: code that compiles."""
    lines: list[str] = []
    method = v.random() < 0.3
    if method:
        cls = v.class_name()
        doc = f"{third_person(v.verb()).capitalize()} {v.adjective()} {plural(v.noun())} for the {v.noun()} {v.noun()}."
        lines += [f"class {cls}:", f'    """{doc}"""', ""]
        field = v.name()
        if field in ("self", "limit"):
            field += "_value"
        lines += _indent(
            [
                f"def __init__(self, {field}: {v.class_name()}, limit: int = {v.number(1, 500)}) -> None:",
                f"    self._{field} = {field}",
                "    self._limit = limit",
            ]
        )
        lines.append("")
    for _ in range(v.number(1, 3)):
        args = _parameters(v, {"self"})
        is_async = v.random() < 0.2
        returns = v.pick(["None", "bool", "int", "str", v.class_name()])
        sig = (
            f"{'async def' if is_async else 'def'} {v.func_name()}({'self, ' if method and args else ''}"
            f"{'self' if method and not args else ''}{args}) -> {returns}:"
        )
        body = [f'"""{v.verb().capitalize()} the {v.adjective()} {v.noun()} and {v.verb()} its {v.noun()}."""']
        for _ in range(v.number(2, 7)):
            body += _statement(v, method=method, is_async=is_async)
            if body[-1].startswith("return "):  # a return ends its block: nothing after it would ever run
                break
        lines += _indent([sig, *_indent(body)], 4 if method else 0) + [""]
    return "\n".join(lines) + "\n"


def make_prose(v: Vocab) -> str:
    """A paragraph of engineering prose about named code."""
    templates = [
        "The {fn} path {verbs} the {adj} {noun} before the {noun2} is {verb2_done}, so a {noun3} can observe a stale value.",
        "When {cls} receives a {noun} with an empty {noun2}, it falls back to the {adj} {noun3} and never {verbs} the cache.",
        "I traced the {noun} through {path}: {fn}() returns early when the {noun2} is {adj}, which skips the {noun3} check.",
        "This matches the {noun} we saw in the {team} dashboard, where p95 latency rose by {n} ms after the {noun2} change.",
        "The fix should keep {fn} idempotent: calling it twice with the same {noun} must not {verb} a second {noun2}.",
        "{cls} assumes the {noun} is {adj}, but the {noun2} written by {fn} can still be {adj2} for up to {n} seconds.",
        "Tests in tests/test_{noun}.py cover the happy path only; none of them {verbs} a {adj} {noun2} or a retry.",
        "A safer approach is to {verb} the {noun} under the {noun2} lock and {verb2} it only after {fn} commits.",
        "Reverting {hex} would hide the symptom, but the root cause is the {adj} {noun} shared between {cls} and {fn}.",
        "Note that {noun}_{noun2} is also read by the {team} batch job, so the change has to stay backwards compatible.",
    ]
    sentences = []
    for _ in range(v.number(1, 5)):
        t = templates[v.index(len(templates))]
        verb, verb2 = v.verb(), v.verb()
        sentences.append(
            t.format(
                fn=v.func_name(),
                verb=verb,
                verbs=third_person(verb),
                verb2=verb2,
                verb2_done=participle(verb2),
                adj=v.adjective(),
                adj2=v.adjective(),
                noun=v.noun(),
                noun2=v.noun(),
                noun3=v.noun(),
                cls=v.class_name(),
                path=v.module_path(),
                team=v.team(),
                n=v.number(2, 900),
                hex=v.hex(7),
            )
        )
    return " ".join(sentences) + "\n\n"


def make_plan(v: Vocab) -> str:
    """A numbered step of an agent's plan."""
    step = v.number(1, 9)
    return (
        f"{step}. {v.verb().capitalize()} `{v.func_name()}` in `{v.module_path()}` and check how it handles a "
        f"{v.adjective()} {v.noun()}; then run `pytest tests/test_{v.noun()}.py -k {v.func_name()}`.\n"
    )


def make_tree(v: Vocab) -> str:
    """A directory of a repository map, as `tree` prints it."""
    noun, suffix = v.noun(), v.pick(["", "s", "_core", "_api", "_jobs"])
    top = plural(noun) if suffix == "s" else noun + suffix
    lines = [f"{v.pick(['services', 'libs', 'packages', 'apps', 'tools'])}/{top}/"]
    entries = sorted(
        {
            f"{v.noun()}_{v.pick(['service', 'models', 'api', 'store', 'tasks', 'utils', 'schema'])}.py"
            for _ in range(v.number(3, 10))
        }
    )
    sub = sorted({v.noun() for _ in range(v.number(0, 3))})
    for i, name in enumerate(entries):
        last = i == len(entries) - 1 and not sub
        lines.append(
            f"{'└── ' if last else '├── '}{name}  # {third_person(v.verb())} {v.adjective()} {plural(v.noun())}"
        )
    for j, d in enumerate(sub):
        lines.append(f"{'└── ' if j == len(sub) - 1 else '├── '}{d}/")
        for _ in range(v.number(1, 4)):
            lines.append(f"{'    ' if j == len(sub) - 1 else '│   '}├── {v.noun()}_{v.noun()}.py")
    return "\n".join(lines) + "\n"


def make_api_doc(v: Vocab) -> str:
    """A reference entry for an internal API."""
    fn = v.func_name()
    params = [
        (v.var_name(), v.pick(["str", "int", "bool", "datetime", v.class_name(), "list[str]"]))
        for _ in range(v.number(1, 4))
    ]
    lines = [
        f"### `{v.class_name()}.{fn}({', '.join(f'{p}: {t}' for p, t in params)})`",
        "",
        f"{third_person(v.verb()).capitalize()} the {v.adjective()} {v.noun()} for a {v.noun()} and returns the {v.noun()} {v.noun()}.",
        f"Raises `{v.class_name()}` when the {v.noun()} is {v.adjective()}. Rate limit: {v.number(10, 5000)} calls/min.",
        "",
    ]
    lines += [f"- `{p}` ({t}): the {v.adjective()} {v.noun()} to {v.verb()}." for p, t in params]
    return "\n".join(lines) + "\n\n"


def make_guideline(v: Vocab) -> str:
    """A rule from a team's coding guidelines."""
    templates = [
        "- Never {verb} a {noun} inside a request handler; enqueue a `{cls}` job and return 202.",
        "- Every public function in `{path}` needs type hints and a docstring that states its {noun} contract.",
        "- Use `{fn}()` instead of touching `{noun}_{noun2}` directly; it holds the {adj} lock for you.",
        "- Database migrations must be reversible and must not {verb} more than {n} rows in one transaction.",
        "- Log with structured fields (`{noun}_id`, `{noun2}_id`); never log a {adj} {noun3} or a secret.",
        "- Feature flags live in `config/flags/{noun}.yaml`; remove a flag within {n} days of full rollout.",
        "- A retry loop needs a bounded budget ({n} attempts max) and jitter; see `{cls}` for the helper.",
    ]
    t = templates[v.index(len(templates))]
    return (
        t.format(
            verb=v.verb(),
            noun=v.noun(),
            noun2=v.noun(),
            noun3=v.noun(),
            cls=v.class_name(),
            path=v.module_path(),
            fn=v.func_name(),
            adj=v.adjective(),
            n=v.number(2, 500),
        )
        + "\n"
    )


def make_search(v: Vocab) -> str:
    """A grep hit, as a search tool returns it."""
    return f"{v.module_path()}:{v.number(1, 900)}:    {_statement(v)[0]}\n"


def make_logline(v: Vocab) -> str:
    """A structured application log line."""
    level = v.pick(["INFO", "INFO", "WARN", "ERROR", "DEBUG"])
    return (
        f"2026-06-15T{v.number(0, 24):02d}:{v.number(0, 60):02d}:{v.number(0, 60):02d}.{v.number(0, 1000):03d}Z {level} "
        f"{v.noun()}.{v.noun()} {v.verb()}_{v.noun()} {v.noun()}_id={v.hex(8)} latency_ms={v.number(1, 4000)} "
        f"status={v.pick(['ok', 'retry', 'timeout', 'error', 'ok'])}\n"
    )


# One- and two-token pieces let a composition hit any exact count; they are rare, so texts still read well.
_TINY = [".\n", "}\n", ")\n", "...\n", "Ok.\n", "--\n"]
# The same for code, every one a line Python compiles wherever a file's top level allows a statement
_TINY_CODE = ["#\n", "...\n", "()\n", "##\n", "pass\n"]


def _filler_code(v: Vocab) -> str:
    return v.pick(
        [
            v.pick(_TINY_CODE),
            f"{v.var_name()} = {v.number(0, 999)}\n",
            f"# TODO({v.team()}): {v.verb()} {v.noun()}\n",
            f"import {v.name()}\n",
            f"from .{v.name()} import {v.class_name()}\n",
            "pass\n",
        ]
    )


def _filler_prose(v: Vocab) -> str:
    return v.pick(
        [
            v.pick(_TINY),
            f"See {v.func_name()}.\n",
            f"Owner: {v.team()}.\n",
            f"Ref {v.hex(7)}.\n",
            "Done.\n",
            f"The {v.noun()} is {v.adjective()}.\n",
        ]
    )


def _filler_logline(v: Vocab) -> str:
    level = v.pick(["INFO", "DEBUG", "WARN"])
    return v.pick(
        [
            v.pick(_TINY),
            f"{level} {v.noun()} ok\n",
            f"{level} {v.verb()} {v.noun()}\n",
            f"{level} {v.noun()}.{v.noun()} {v.verb()}\n",
            f"DEBUG {v.noun()}_id={v.hex(8)}\n",
        ]
    )


def _filler_tree(v: Vocab) -> str:
    return v.pick([v.pick(_TINY), f"├── {v.noun()}.py\n", f"└── {v.noun()}_{v.noun()}.py\n", f"docs/{v.noun()}.md\n"])


KINDS = ("code", "prose", "plan", "tree", "api_doc", "guideline", "search", "logline")


def _in_english(make: Callable[[Vocab], str]) -> Callable[[Vocab], str]:
    """A maker whose articles agree with the words after them (the templates cannot know which word comes)."""

    def made(v: Vocab) -> str:
        return fix_articles(make(v))

    made.__name__ = make.__name__
    return made


UNIT_MAKERS: dict[str, Callable[[Vocab], str]] = {
    "code": _in_english(make_code),
    "prose": _in_english(make_prose),
    "plan": _in_english(make_plan),
    "tree": _in_english(make_tree),
    "api_doc": _in_english(make_api_doc),
    "guideline": _in_english(make_guideline),
    "search": _in_english(make_search),
    "logline": _in_english(make_logline),
}

FILLER_MAKERS: dict[str, Callable[[Vocab], str]] = {
    "code": _in_english(_filler_code),
    "prose": _in_english(_filler_prose),
    "plan": _in_english(_filler_prose),
    "tree": _in_english(_filler_tree),
    "api_doc": _in_english(_filler_prose),
    "guideline": _in_english(_filler_prose),
    "search": _in_english(_filler_code),
    "logline": _in_english(_filler_logline),
}
