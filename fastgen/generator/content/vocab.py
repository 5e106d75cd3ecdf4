"""Words and identifiers for synthetic code and prose.

The lists are deliberately broad (a few hundred stems) and identifiers are built by combining them, so a corpus
has tens of thousands of distinct names, as a real codebase does, instead of a short list of repeated words.
"""

from __future__ import annotations

import keyword

import numpy as np

from .english import plural

__all__ = ["Vocab"]

NOUNS = """
account address adapter agent alert allocation archive artifact asset attempt audit backend balance batch
bucket buffer build bundle cache calendar campaign candidate capacity cart catalog certificate channel
checkout checksum claim client cluster cohort column command comment commit config connection consumer
contract cookie counter coupon credential cursor customer dashboard dataset deadline delivery deployment
device diff digest directory discount dispatch document domain draft endpoint entry envelope event export
feature feed field filter fixture flag forecast frame gateway graph grant handler header heartbeat hook
identity image import incident index inventory invoice issue item job journal kernel key label lease
ledger limit listener locale lock log manifest mapping marker member merchant message metric migration
mirror model module monitor mutex namespace node notification offset order origin owner package page
parser partition patch payload payment peer permission pipeline plan policy pool port position preference
price process producer profile project prompt provider queue quota rate receipt record region registry
release replica report request reservation resolver resource response retry revision role route rule
runner sample scheduler schema scope secret segment selector sequence server session setting shard
shipment signal snapshot socket source span spec stage state status step storage stream subscription
summary supplier table tag target task template tenant thread ticket timer token topic trace transaction
transfer trigger upload usage user validator value vault vendor version view volume warehouse webhook
window worker workspace zone
""".split()

VERBS = """
accept acquire add aggregate allocate apply archive assign authorize build cache calculate cancel capture
check clean clear close collect commit compact compare compile compute configure confirm connect convert copy
create decode delete deliver detect diff dispatch drain emit enqueue ensure estimate evaluate evict expand
export extract fetch filter finalize flush format forward freeze generate group handle hash import index
init inspect invalidate load lock lookup map mark match merge migrate normalize notify open parse patch
persist poll prepare process publish purge query queue read rebuild record refresh register reject release
reload remove render replay report request reserve reset resolve restore retry rotate route sample save
scan schedule serialize settle shutdown sign snapshot sort split start stop store stream submit summarize
sync tag throttle track transform trim truncate unlock unpack update upload upsert validate verify watch wrap
write
""".split()

ADJECTIVES = """
active async atomic base bounded cached canonical cold composite concurrent current default deferred dirty
distributed dynamic empty encrypted expired external fallback final global hot idle immutable incoming
inline internal invalid lazy legacy local logical missing nested offline optional orphaned outgoing partial
pending primary private public raw readonly recent regional remote required reserved retryable safe scoped
secondary shared signed stale static strict sync temporary trusted unique unsigned upstream valid versioned
virtual weighted
""".split()

PROSE_WORDS = """
because when while after before although unless since however therefore instead meanwhile otherwise
apparently currently previously eventually occasionally consistently intermittently
request response customer release production staging deploy rollback latency timeout regression
boundary edge case condition assumption invariant contract behaviour behavior expectation symptom root cause
workaround mitigation follow-up ticket reviewer maintainer on-call incident report dashboard alert
""".split()

SHORT_NAMES = "i n k x key value item result data path count row ctx resp req obj idx buf msg err cfg out args".split()

TEAMS = "payments platform search growth infra identity billing data mobile web core ml risk ops".split()
TLDS = "io dev internal corp net".split()


class Vocab:
    """A seeded vocabulary of names: modules, classes, functions, variables, paths.

    Draws come from a buffer of uniforms pulled from the generator in batches: one numpy call per 256 draws
    instead of one per draw, which is most of the cost of making text.
    """

    _BATCH = 256

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self._buffer: list[float] = []
        self._next = 0

    def random(self) -> float:
        if self._next == len(self._buffer):
            self._buffer = self.rng.random(self._BATCH).tolist()
            self._next = 0
        self._next += 1
        return self._buffer[self._next - 1]

    def index(self, n: int) -> int:
        return int(self.random() * n)

    def pick(self, words: list[str]) -> str:
        return words[int(self.random() * len(words))]

    def noun(self) -> str:
        return self.pick(NOUNS)

    def verb(self) -> str:
        return self.pick(VERBS)

    def adjective(self) -> str:
        return self.pick(ADJECTIVES)

    def func_name(self) -> str:
        parts = [self.verb()]
        if self.random() < 0.3:
            parts.append(self.adjective())
        parts.append(self.noun())
        if self.random() < 0.15:
            parts.append(self.noun())
        return "_".join(parts)

    def class_name(self) -> str:
        parts = [
            self.noun(),
            self.pick(
                [
                    "Service",
                    "Manager",
                    "Client",
                    "Store",
                    "Handler",
                    "Builder",
                    "Resolver",
                    "Repository",
                    "Controller",
                    "Worker",
                    "Policy",
                    "Error",
                ]
            ),
        ]
        if self.random() < 0.6:
            parts.insert(0, self.pick([self.adjective(), self.noun()]))
        return "".join(p[:1].upper() + p[1:] for p in parts)

    def name(self, word: str | None = None) -> str:
        """A noun (or `word`) as an identifier: a keyword gets PEP 8's trailing underscore (import_, async_)."""
        word = self.noun() if word is None else word
        return word + "_" if keyword.iskeyword(word) else word

    def var_name(self) -> str:
        r = self.random()
        if r < 0.45:  # real code is full of short locals: they set its characters per token as much as long names
            return self.pick(SHORT_NAMES)
        if r < 0.75:
            return self.name()
        return f"{self.adjective()}_{self.noun()}"

    def module_path(self, root: str = "src") -> str:
        depth = self.number(1, 4)
        dirs = []
        for _ in range(depth):
            noun = self.noun()
            dirs.append(plural(noun) if self.random() < 0.3 else noun)
        return "/".join(
            [
                root,
                *dirs,
                f"{self.noun()}_{self.pick(['service', 'models', 'utils', 'api', 'store', 'handlers', 'views', 'tasks', 'client', 'schema'])}.py",
            ]
        )

    def number(self, lo: int = 0, hi: int = 10000) -> int:
        """An integer in [lo, hi)."""
        return lo + int(self.random() * (hi - lo))

    def hex(self, n: int = 8) -> str:
        return "".join("0123456789abcdef"[int(self.random() * 16)] for _ in range(n))

    def team(self) -> str:
        return self.pick(TEAMS)

    def host(self) -> str:
        return f"{self.noun()}-{self.pick(TEAMS)}.{self.pick(TLDS)}"

    def prose_word(self) -> str:
        return self.pick(PROSE_WORDS)
