"""What a run is planned from, before any byte is generated: the workload, model, tokenizer, seed and compression,
given or read back from a manifest; the tokenizer loaded and checked against what the manifest records; and the
lines the command says about it (how prompts are counted, what to warn of). Nothing here prints.

Every refusal is a SpecError (exit 2, as a usage error) naming the option to change."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine_endpoints import engine_named
from ..errors import SpecError
from ..formats.chat_template import (
    SHIPPED_TEMPLATES,
    TEMPLATE_FILE,
    read_template_file,
    resolve_template_file,
    template_origin,
)
from ..formats.manifest import read_manifest_file
from ..formats.tokenizer import BUILTIN_NAME, Tokenizer, load_tokenizer
from .model_match import family_of, missing_tokens, model_mismatch
from .spec import Spec
from .workload import spec_from_document

__all__ = ["RunPlan", "counting_line", "load_planned_tokenizer", "plan_from_manifest", "tokenizer_warnings"]


@dataclass(frozen=True)
class RunPlan:
    """A run's identity. `recorded` is the tokenizer a manifest records (its sha256 and any chat template's, which
    the tokenizer must have), `manifest` the manifest the plan was read from; both None for a plan given."""

    spec: Spec
    model: str
    tokenizer: str
    revision: str | None
    seed: int
    zstd_level: int | None
    arguments: dict[str, Any] = field(default_factory=dict)
    recorded: dict[str, Any] | None = None
    manifest: Path | None = None

    @property
    def count(self) -> str:
        return self.arguments.get("count", "content")  # a manifest from before --count was counted by content


def plan_from_manifest(path: Path, *, tokenizer: str | None = None, tokenizer_revision: str | None = None) -> RunPlan:
    """The plan a manifest records. A tokenizer given may be the same tokenizer elsewhere (its sha256 is checked
    when it is loaded); without one, the recorded hub commit pins the revision."""
    doc = read_manifest_file(path)
    arguments = doc.get("arguments") or {}
    try:
        spec = spec_from_document(doc["workload"], source=f"{path} (workload)")
        model, recorded_name, seed = arguments["model"], arguments["tokenizer"], arguments["seed"]
        zstd_level = arguments.get("zstd_level")
        recorded = {**doc["tokenizer"], "sha256": doc["tokenizer"]["sha256"]}  # a KeyError: no tokenizer recorded
        commit = doc["tokenizer"].get("commit")  # a hub tokenizer: the very commit it was made with
    except (KeyError, TypeError):
        raise SpecError(
            f"{path} records no workload, arguments or tokenizer (written by fastgen "
            f"before 0.3?); regenerate with the options it was made with"
        ) from None
    revision = None if tokenizer else (tokenizer_revision or commit)
    return RunPlan(
        spec=spec,
        model=model,
        tokenizer=tokenizer or recorded_name,
        revision=revision,
        seed=seed,
        zstd_level=zstd_level,
        arguments=arguments,
        recorded=recorded,
        manifest=path,
    )


def load_planned_tokenizer(plan: RunPlan, *, chat_template: Path | None = None) -> Tokenizer:
    """The plan's tokenizer with --chat-template (or the template the manifest records) on it, checked: the
    manifest's sha256s, and a chat template where prompts are counted as one renders them."""
    tokenizer = load_tokenizer(plan.tokenizer, plan.revision)
    if plan.recorded is not None and tokenizer.identity.sha256 != plan.recorded["sha256"]:
        raise SpecError(
            f"tokenizer {plan.tokenizer} is not the one {plan.manifest} was made with (sha256 "
            f"{tokenizer.identity.sha256[:12]}, not {plan.recorded['sha256'][:12]}); the bytes would differ"
        )
    _use_chat_template(tokenizer, plan, chat_template)
    if plan.count == "template" and not tokenizer.has_chat_template:
        raise SpecError(
            f"--count template needs a chat template, and tokenizer {plan.tokenizer} has none; use "
            f"--count content, pass --chat-template FILE, or a tokenizer folder with its chat template"
        )
    return tokenizer


def _use_chat_template(tokenizer: Tokenizer, plan: RunPlan, given: Path | None) -> None:
    """The template given (or, from a manifest, the one it records) onto the tokenizer. A manifest's template must
    come back with the same sha256; a tokenizer folder that already holds it (the dataset's own tokenizer folder)
    needs no file."""
    path = given or plan.arguments.get("chat_template")
    want = (plan.recorded or {}).get("chat_template")
    if path is None:
        return
    own = tokenizer.folder_files.get(TEMPLATE_FILE)
    if given is None and want and own is not None and hashlib.sha256(own).hexdigest() == want["sha256"]:
        tokenizer.use_chat_template(own.decode("utf-8"), name=want["name"])
        return
    file = resolve_template_file(str(path))
    tokenizer.use_chat_template(read_template_file(file), name=file.name)
    used = tokenizer.identity.chat_template or {}  # use_chat_template sets it
    if want and used.get("sha256") != want["sha256"]:
        raise SpecError(
            f"chat template {path} is not the one {plan.manifest} was made with (sha256 "
            f"{used['sha256'][:12]}, not {want['sha256'][:12]}); the bytes "
            f"would differ"
        )


def counting_line(tokenizer: Tokenizer, count: str, model: str) -> str:
    """How input_tokens are counted, for the start-up line: as a template renders the prompts, or content only
    (with the templates the window check measures instead)."""
    ident = tokenizer.identity
    if count != "content" and tokenizer.has_chat_template:
        if ident.chat_template is not None:
            return (
                f"prompts counted as --chat-template {ident.chat_template['name']} (sha256 "
                f"{ident.chat_template['sha256'][:12]}) renders them"
            )
        return (
            f"prompts counted as the chat template of tokenizer {ident.source} "
            f"({template_origin(tokenizer.folder_files)}) renders them"
        )
    why = "--count content" if tokenizer.has_chat_template else f"{ident.source} has no chat template"
    return (
        f"content tokens only: {why}; the window check allows for what {_assumed(model)} renders around the "
        f"content, measured on the first 8 sessions of each scenario"
    )


def _assumed(model: str) -> str:
    """The shipped templates the window check measures a tokenizer without one by, in words."""
    family = family_of(model)
    if family is not None:
        return f"the shipped template {family.template} ({family.name}, --model's family)"
    return f"the widest of the shipped templates {', '.join(SHIPPED_TEMPLATES)} (--model names no family fastgen knows)"


def tokenizer_warnings(
    tokenizer: Tokenizer, *, model: str, default_model: str, model_given: bool, tokenizer_name: str, server_type: str
) -> list[str]:
    """One line each: a tokenizer for the default model, one without a chat template, one that is not --model's
    family's, one that lacks special tokens its template or the server's tool-call parser need."""
    lines = []
    if model == default_model and tokenizer_name not in (default_model, BUILTIN_NAME):
        lines.append(
            f"--tokenizer {tokenizer_name} with the default --model {default_model}: the configs ask the server "
            f"for that model; pass --model with the name your server serves"
        )
    if not tokenizer.has_chat_template:
        shipped = "; ".join(f"{name}: {what}" for name, what in SHIPPED_TEMPLATES.items())
        lines.append(
            f"tokenizer {tokenizer_name} has no chat template, so input_tokens count content tokens only, and "
            f"servers need one to render the prompts: pass --chat-template FILE (the served model's "
            f"chat_template.jinja) or a template fastgen ships ({shipped}), or use the model's own "
            f"tokenizer folder"
        )
    mismatch = model_mismatch(model, tokenizer) if model_given else None
    lacking = missing_tokens(tokenizer, model=model, engine=engine_named(server_type))
    lines.extend(line for line in (mismatch, lacking) if line is not None)
    return lines
