"""The native path: a session as plain Python dicts, serialized with the standard library's `json`.

This is how the original generator wrote traces (every span re-serializes and re-escapes its whole history). It
is the oracle the spliced path in `spans.py` must match byte for byte, and the baseline native_bench measures.
"""

from __future__ import annotations

import json

from .messages import SessionPlan
from .prompt_tokens import PromptCount
from .spans import CONTENT_COUNT, output_parts, session_dict, session_spans

__all__ = ["native_session_bytes"]


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def native_session_bytes(plan: SessionPlan, *, model: str, count: PromptCount = CONTENT_COUNT) -> bytes:
    spans = session_spans(
        plan,
        model=model,
        count=count,
        input_messages=lambda turn: _dumps([m.wire for m in turn.messages]),
        output_messages=lambda turn: _dumps(output_parts(turn.output)),
        tool_definitions=_dumps(list(plan.catalog.tools)),
    )
    return _dumps(session_dict(plan, spans)).encode()
