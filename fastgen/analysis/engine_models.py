"""Which engine model a replica runs: vLLM's scheduler (engine_vllm.py) or SGLang's (engine_sglang.py), by the
rules' publication rule."""

from __future__ import annotations

from .cache import BlockCache
from .engine_base import Engine
from .engine_sglang import SglangEngine
from .engine_vllm import VllmEngine
from .rules import CacheRules, SchedulerSettings
from .step_time import ServiceModel

__all__ = ["make_engine"]


def make_engine(
    rules: CacheRules, settings: SchedulerSettings, cache: BlockCache, service: ServiceModel, **noise
) -> Engine:
    """An engine replica under `rules` (vLLM's or SGLang's scheduler); `noise`: Engine's noise, step_cv, wake_s."""
    kind = SglangEngine if rules.publish_after_prefill else VllmEngine
    return kind(rules, settings, cache, service, **noise)
