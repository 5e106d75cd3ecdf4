"""The ceilings `fastgen analyze --json` predicts, for the report to set beside each measured hit ratio.

Read from the JSON document (its format is analysis/report.py's), not by importing the analysis: the report only
needs the numbers, and a file from another machine serves as well.

An analysis of replicas behind a router (`--replicas N --router POLICY`) predicts the fleet's hit ratio: each replica
its own cache (unbounded for "inf", at the per-replica capacity for "cap"), each request meeting the cache of the
replica the policy sends it to, pooled over all the fleet's requests as a measured hit ratio behind a router is. It
is named so wherever it is described: the unbounded ceiling moves with the router, since a round-robin fleet splits a
session's turns over caches that one cache would have held together.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

__all__ = ["Ceilings", "ceilings_of", "read_ceilings"]


@dataclass
class Ceilings:
    """Per config: prompt tokens and the tokens analyze predicts the engine caches (infinite, at capacity), in all
    and per turn; pooled over any set of configs and turns the way hit ratios pool."""

    capacity_tokens: Optional[int] = None
    configs: dict[str, dict] = field(default_factory=dict)
    block_size: Optional[int] = None
    rules: Optional[str] = None  # the cache rules the simulation followed (an older analysis: its definition)
    source: str = ""  # the file's name
    replicas: int = 1  # engine replicas behind a router, each its own cache (capacity_tokens: each one's)
    router: Optional[str] = None  # their router's policy; None: one engine

    def describe(self) -> str:
        """One line: where the ceilings come from and what they assume."""
        fleet = self.fleet()
        capacity = (
            "none (unbounded only)"
            if self.capacity_tokens is None
            else f"{self.capacity_tokens:,} tokens{' per replica' if fleet else ''}"
        )
        block = self.block_size if self.block_size is not None else "not recorded"
        of = f"ceilings for {fleet} (each replica its own cache, pooled over the fleet's requests), " if fleet else ""
        return f"{self.source}: {of}KV capacity {capacity}, block size {block}, rules {self.rules or 'not recorded'}"

    def fleet(self) -> str:
        """The fleet the ceilings are of ("2 replicas behind round_robin"); "" for one engine."""
        return "" if self.router is None else f"{self.replicas} replicas behind {self.router}"

    def percent(self, names: list[str], turn: Optional[int] = None) -> tuple[Optional[float], Optional[float]]:
        """(infinite %, at-capacity %) pooled over these configs (and one turn), None where not predicted."""
        prompt = infinite = 0.0
        capacity: Optional[float] = 0.0
        for name in names:
            entry = self.configs.get(name)
            if entry is None:
                return None, None
            if turn is not None:
                entry = entry["by_turn"].get(str(turn))
                if entry is None:
                    return None, None
            tokens = entry["prompt_tokens"]
            prompt += tokens
            infinite += tokens * (entry["hit_percent_infinite"] or 0) / 100
            cap = entry.get("hit_percent_capacity")
            capacity = None if cap is None or capacity is None else capacity + tokens * cap / 100
        if not prompt:
            return None, None
        return 100 * infinite / prompt, None if capacity is None else 100 * capacity / prompt

    def band(self, name: str, which: str) -> Optional[tuple[float, float]]:
        """The [lowest, highest] hit % analyze's jittered replays gave one config, `which` "infinite" or
        "capacity"; None where the analysis has no band (an older one, or --band 0)."""
        band = (self.configs.get(name) or {}).get(f"hit_percent_{which}_band")
        return (float(band[0]), float(band[1])) if isinstance(band, list) and len(band) == 2 else None

    def band_kind(self) -> Optional[str]:
        """Which ceiling the analysis gives bands for: "capacity" where it has a capacity, else "infinite"; None
        where no config has one (an older analysis, or --band 0)."""
        which = "capacity" if self.capacity_tokens is not None else "infinite"
        return which if any(self.band(name, which) for name in self.configs) else None


def ceilings_of(doc: dict, source: str) -> Ceilings:
    """The ceilings of an analysis document (analysis/report.py's analysis_document), `source` naming it."""
    return Ceilings(
        doc.get("capacity_tokens"),
        {c["config"]: c for c in doc["configs"]},
        doc.get("block_size"),
        doc.get("rules") or doc.get("definition", "vllm"),
        source,
        int(doc.get("replicas") or 1),
        # an analysis of one engine names a router too (its default, unused): only replicas make it a fleet's
        doc.get("router") if int(doc.get("replicas") or 1) > 1 else None,
    )


def read_ceilings(path: Path) -> tuple[Optional[Ceilings], list[str]]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        if doc.get("definition", "vllm") != "vllm":
            return None, [
                f"{path} holds AIPerf's definition, not ceilings; run fastgen analyze --json without "
                f"--definition aiperf"
            ]
        return ceilings_of(doc, Path(path).name), []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, [
            f"--analysis {path} is not the JSON of fastgen analyze --json ({str(exc)[:80]}); the report has no ceilings"
        ]
