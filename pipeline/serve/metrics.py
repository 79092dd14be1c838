"""`GET /metrics`: the server's counters in Prometheus's text format, from the maintained
prometheus_client (a registry of the app's own, so two apps in one process never share counts).

Named like Triton's where Triton has the figure (prometheus_client adds `_total` to every counter):

    nv_inference_request_success_total{model,version}          infer requests answered 200 (gRPC: OK)
    nv_inference_request_failure_total{model,version,reason}   the others: REJECTED (503, the queue was
                                                               full), BACKEND (500), OTHER (4xx), gRPC's
                                                               by the REST status they stand for
    nv_inference_pending_request_count{model,version}          admitted, not on an instance yet

and `modelopt_` where it has not:

    modelopt_inference_request_duration_seconds{model,version} histogram of successful infer requests,
                                                               arrival to response built
    modelopt_inference_in_flight{model,version}                requests running on an instance now
    modelopt_http_responses_total{status}                      every HTTP response, any route, by status
    modelopt_grpc_responses_total{code}                        every gRPC answer, any method, by status code
                                                               (OK, INVALID_ARGUMENT...; not a message grpc
                                                               itself refused for its size)

The infer counters count requests whichever transport (REST or gRPC) they came by.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REASONS = {503: "REJECTED", 500: "BACKEND"}  # Triton's failure reasons; any other status is OTHER


class Metrics:
    """The server's metrics: `pending` and `in_flight` are read when scraped."""

    def __init__(self, model: str, version: str, pending: Callable[[], int], in_flight: Callable[[], int]) -> None:
        disable_created_metrics()  # no `_created` sample beside each counter (process-wide: only the server counts)
        self.registry = CollectorRegistry()
        labels = {"model": model, "version": version}
        names = list(labels)

        def counter(name: str, doc: str, *more: str) -> Counter:
            return Counter(name, doc, [*names, *more], registry=self.registry)

        self._success = counter("nv_inference_request_success", "infer requests answered 200").labels(**labels)
        self._failure = counter("nv_inference_request_failure", "infer requests refused", "reason")
        self._labels = labels
        self._duration = Histogram(
            "modelopt_inference_request_duration_seconds", "successful infer requests, arrival to response built",
            names, registry=self.registry, buckets=BUCKETS_S,
        ).labels(**labels)  # fmt: skip
        for name, doc, read in (
            ("nv_inference_pending_request_count", "admitted infer requests not on an instance yet", pending),
            ("modelopt_inference_in_flight", "infer requests running on an instance", in_flight),
        ):
            Gauge(name, doc, names, registry=self.registry).labels(**labels).set_function(read)
        self.responses = Counter("modelopt_http_responses", "HTTP responses", ["status"], registry=self.registry)
        self.grpc_responses = Counter("modelopt_grpc_responses", "gRPC answers", ["code"], registry=self.registry)

    def succeeded(self, seconds: float) -> None:
        self._success.inc()
        self._duration.observe(seconds)

    def failed(self, status: int) -> None:
        self._failure.labels(**self._labels, reason=REASONS.get(status, "OTHER")).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text to answer /metrics with, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class CountResponses:
    """ASGI middleware counting every response by status, errors of unknown routes and crashes included
    (a crash escapes it before a response starts: it counts as the 500 the error handler sends)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.responses.labels(str(status)).inc()
