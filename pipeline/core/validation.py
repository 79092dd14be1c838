"""pydantic validation that names the file and the dotted field of the first problem, in one line."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from pipeline.core.errors import ConfigError


class FieldError(ValueError):
    """A cross-field error that knows which field is at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def format_validation_error(error: ValidationError, source: str, prefix: str = "") -> str:
    """First problem of a pydantic error as one line: 'file: dotted.field: message'."""
    first = error.errors()[0]
    location = [str(part) for part in first["loc"] if not str(part).startswith(("function-", "literal["))]
    context = first.get("ctx", {}).get("error")
    if isinstance(context, FieldError):
        location, message = [*location, context.field], str(context)
    else:
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] not in {"missing", "extra_forbidden", "value_error"} and "input" in first:
            message += f" (got {first['input']!r})"
        if first["type"] == "extra_forbidden":
            message = "unknown key (check its spelling)"
    field = ".".join(filter(None, [prefix, *location])) or "(top level)"
    return f"{source}: {field}: {message}"


def validate(model: type[BaseModel], data: Any, source: str, prefix: str = "") -> Any:
    """Validate `data` against `model`, raising ConfigError with one clear line."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, source, prefix)) from None
