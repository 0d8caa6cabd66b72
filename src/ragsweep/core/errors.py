"""Error types. Every user-facing failure is a ``RagsweepError`` with a message that names
the offending key, file, line or case, so the CLI can print it without a traceback."""


class RagsweepError(Exception):
    """Base class for errors caused by user input or environment, not by a bug."""


class ConfigError(RagsweepError):
    """An invalid configuration value (names the key and the allowed range)."""


class CorpusError(RagsweepError):
    """A corpus that cannot be read (names the file or line)."""


class GoldenError(RagsweepError):
    """An invalid golden set entry (names the file, line and case id)."""


class DriftError(RagsweepError):
    """Index and query side disagree on the model or preprocessing that produced them."""


class BackendError(RagsweepError):
    """An embedding or generation backend is unavailable or answered badly."""


class ContractError(RagsweepError):
    """A retrieval contract failed, found without calling a model (docs/retrieval.md,
    "Contract checks"): a query embedding of the wrong dimension, a retrieved chunk outside
    the corpus snapshot, a chunk a case's principal may not retrieve under a filter."""


class CacheError(RagsweepError):
    """The stage cache cannot be used as configured (names ``cache.dir`` and what to do)."""


class OutputError(RagsweepError):
    """A run's artifacts cannot be written (names the run directory and what to do)."""


MAX_REPORTED_PROBLEMS = 20
"""How many problems of one input file an error message lists; the rest are counted."""


class ProblemList:
    """Problems found in one pass over an input file, raised together.

    Each problem is one complete message (``<file>:<line>: ...``). :meth:`raise_if_any`
    raises ``error`` with the single message, or with a header naming ``source`` and the
    count, the first ``cap`` messages and how many more there are.
    """

    def __init__(
        self, source: str, error: type[RagsweepError], cap: int = MAX_REPORTED_PROBLEMS
    ) -> None:
        self.source = source
        self.error = error
        self.cap = cap
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        self.messages.append(message)

    def __len__(self) -> int:
        return len(self.messages)

    def raise_if_any(self) -> None:
        if not self.messages:
            return
        if len(self.messages) == 1:
            raise self.error(self.messages[0])
        raise self.error(self.summary())

    def summary(self) -> str:
        """The header, up to ``cap`` messages (indented) and the count of the rest."""
        total = len(self.messages)
        shown = self.messages[: self.cap]
        header = f"{self.source}: {total} problems"
        if total > self.cap:
            header += f" (the first {self.cap} are listed)"
        lines = [header + "; fix them and run again:", *(f"  {m}" for m in shown)]
        if total > self.cap:
            lines.append(f"  ... and {total - self.cap} more")
        return "\n".join(lines)
