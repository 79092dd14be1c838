"""Every error the server answers is `{"error": "<one line>"}`: the body the Open Inference Protocol
gives errors, and the only one `tritonclient` reads (it raises InferenceServerException with that
line). FastAPI's own answers ({"detail": ...} for an unknown route, a wrong method or a validation
error, plain text for a crash) would reach a v2 client as a decoding failure, so `install` replaces
them all: an unknown route is 404, a wrong method 405, a malformed request 400, and anything uncaught
500, its one line naming the exception (uvicorn logs the traceback; the server keeps serving). The
gRPC service answers the same lines, its status codes standing for these (grpc_service.py).
"""

from __future__ import annotations

from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as RoutingError

from pipeline.core.errors import ModelFileError, first_line
from pipeline.serve.tensors import BadRequest


class HTTPError(Exception):
    """An answer the server chose: its status, one line, and headers (503's Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def status_of(error: BaseException) -> int:
    """The HTTP status an exception is answered with."""
    if isinstance(error, HTTPError):
        return error.status
    if isinstance(error, RoutingError):
        return error.status_code
    if isinstance(error, RequestValidationError | BadRequest | ModelFileError):
        return 400
    return 500


def message_of(error: BaseException, where: str) -> str:
    """The line an exception is answered with, `where` naming the request (REST's method and path,
    gRPC's method)."""
    if isinstance(error, HTTPError):
        return error.message
    if isinstance(error, RoutingError) and error.status_code == 404:
        return f"{where}: no such route (the v2 routes are under /v2; /metrics)"
    if isinstance(error, RoutingError) and error.status_code == 405:
        return f"{where}: method not allowed (allowed: {(error.headers or {}).get('Allow', 'none')})"
    if isinstance(error, RoutingError):
        return f"{where}: {error.detail or HTTPStatus(error.status_code).phrase}"
    if isinstance(error, RequestValidationError):
        problems = (f"{'.'.join(map(str, p.get('loc', ())))}: {p.get('msg', '')}" for p in error.errors())
        return f"{where}: {'; '.join(problems)}"
    if isinstance(error, BadRequest | ModelFileError):
        return first_line(error)
    return f"{where}: internal error: {type(error).__name__}: {first_line(error)}"


def one_line(error: BaseException, where: str) -> str:
    """message_of on one line, whatever a library wrote."""
    return " ".join(message_of(error, where).split())


async def answer(request: Request, error: Exception) -> JSONResponse:
    headers = error.headers if isinstance(error, HTTPError | RoutingError) else None
    line = one_line(error, f"{request.method} {request.url.path}")
    return JSONResponse({"error": line}, status_of(error), headers=headers)


def install(app: FastAPI) -> None:
    """Answer every error with `{"error": ...}` (Exception's handler runs for anything uncaught)."""
    for kind in (HTTPError, RoutingError, RequestValidationError, BadRequest, ModelFileError, Exception):
        app.add_exception_handler(kind, answer)
