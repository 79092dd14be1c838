"""Errors a user can act on.

A `PipelineError` is printed as one line (no traceback) naming the file and field at fault;
anything else is a bug or a library failure and keeps its traceback.
"""

from pipeline.core.outcome import Kind


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first non-empty line of an exception's message: libraries often write paragraphs."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()[:limit]
    return type(error).__name__


def one_line(error: BaseException, limit: int = 300) -> str:
    """The whole message with its whitespace collapsed, for messages whose first line says little."""
    return " ".join(str(error).split())[:limit] or type(error).__name__


class PipelineError(Exception):
    """A problem with the user's input: params.yaml, a model file, a data file."""


class ConfigError(PipelineError):
    """params.yaml (or another config file) is malformed or inconsistent."""


class NotApplicable(PipelineError):
    """A variant cannot be built for this model: recorded as skipped (its `kind`), not failed."""

    kind = Kind.NOT_APPLICABLE


class Unavailable(NotApplicable):
    """A variant could apply, but a package or device it needs is missing on this machine."""

    kind = Kind.UNAVAILABLE


class ModelFileError(PipelineError):
    """A model or data file is missing, corrupt, or does not match its declared input spec."""
