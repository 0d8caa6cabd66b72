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


class CacheError(RagsweepError):
    """The stage cache cannot be used as configured (names ``cache.dir`` and what to do)."""


class OutputError(RagsweepError):
    """A run's artifacts cannot be written (names the run directory and what to do)."""

