"""`python -m pipeline serve deploy/<model> --port N --grpc-port M`: the deploy folder behind the Open
Inference Protocol, REST and gRPC (KServe v2's `grpc-v2`, grpc_service.py) from one process, for local
use and as a KServe custom predictor.

Built on FastAPI and uvicorn, the ASGI stack KServe's own Python model server runs on (kserve 0.21
pins protobuf<7 and psutil<6, which the pipeline's environment cannot take). Every request goes
through the same checks as `predict` (a bad one gets HTTP 400 and one line naming the tensor and the
bound; the server keeps serving) and runs with the runtime settings the benchmark measured the
artifact's concurrent throughput with: as many instances as it ran requests at once (ONNX Runtime: a
session each with its share of the threads; OpenVINO: the THROUGHPUT hint's infer requests), each
serving one request at a time on a thread of its own (the runtimes release the GIL while they compute).

    GET  /v2/health/live, /v2/health/ready, /v2/models/<model>/ready
    GET  /v2                                   server metadata
    GET  /v2/models/<model>                    model metadata: tensors from the model file, the manifest's facts
    POST /v2/models/<model>/infer              (also under /versions/1/): JSON or binary tensors of every
                                               datatype (BYTES, BF16 too), Triton's raw binary request,
                                               gzip/deflate bodies and responses
    GET  /metrics                              Prometheus text (metrics.py)

Every error is `{"error": "<one line>"}` (errors.py): 400 a request the protocol or the model cannot
take, 404 an unknown route, model or version, 405 a wrong method, 413 a body over `--max-body-mb`
(body.py), 415 an unknown Content-Encoding, 503 with Retry-After when `--max-queue` requests already
wait for an instance (admission.py), 500 anything uncaught. gRPC answers the same lines with its
status codes; its requests share the instances, the queue and the counters (`Service`).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pipeline.core.data import Arrays
from pipeline.core.errors import ModelFileError, PipelineError
from pipeline.serve import body, errors, protocol
from pipeline.serve.metrics import CountResponses
from pipeline.serve.service import MAX_BODY_MB, SERVER, VERSION, Limits, Model, Service

QUEUE_PER_INSTANCE = 4  # --max-queue's default: requests that may wait for each instance
GRPC_PORT = 8001  # --grpc-port's default, Triton's (0: no gRPC)


def create_app(model: Model, limits: Limits | None = None, grpc_address: str | None = None) -> FastAPI:
    """The v2 REST routes for one model, its /metrics, and every error as {"error": ...}; with
    `grpc_address` (host:port), the v2 gRPC service there too (grpc_service.py), started and stopped
    with the app and sharing its queue and counters."""
    service = Service(model, limits or Limits(QUEUE_PER_INSTANCE * model.count))
    metrics, known = service.metrics, model.known

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if grpc_address is None:
            yield
            return
        from pipeline.serve import grpc_service

        grpc_server = await grpc_service.start(service, grpc_address)
        try:
            yield
        finally:
            await grpc_server.stop(grpc_service.GRACE_S)

    title = f"{model.name} (Open Inference Protocol)"
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    errors.install(app)
    app.add_middleware(CountResponses, metrics=metrics)

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    async def health() -> dict[str, bool]:
        return {"live": True, "ready": True}

    @app.get("/v2")
    async def server_metadata() -> dict[str, Any]:
        return SERVER

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None) -> Response:
        known(name, version)
        return JSONResponse({"name": name, "ready": True})

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    async def model_metadata(name: str, version: str | None = None) -> Response:
        known(name, version)
        return JSONResponse(model.metadata())

    @app.get("/metrics")
    async def prometheus() -> Response:
        text, content_type = metrics.exposition()
        return Response(text, media_type=content_type)

    @app.post("/v2/models/{name}/infer")
    @app.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(name: str, request: Request, version: str | None = None) -> Response:
        known(name, version)

        async def decode() -> protocol.InferRequest:
            content = await body.read(request, service.limits.body_bytes)
            return model.decode(content, request.headers.get(protocol.HEADER_LENGTH))

        def encode(outputs: Arrays, decoded: protocol.InferRequest) -> tuple[bytes, dict[str, str]]:
            return protocol.encode(outputs, decoded, model.name, VERSION, model.output_datatypes)

        content, headers = await service.infer(decode, encode)
        content, encoding = body.compress(content, request.headers.get("accept-encoding"))
        return Response(content, headers=headers | encoding)

    return app


def serve(
    folder: Path,
    host: str,
    port: int,
    instances: int | None = None,
    threads: int | None = None,
    max_queue: int | None = None,
    max_body_mb: float = MAX_BODY_MB,
    grpc_port: int = GRPC_PORT,
) -> None:
    """Load the deploy folder and serve it until interrupted: REST on `port`, gRPC on `grpc_port` (0: none)."""
    import uvicorn

    if (max_queue is not None and max_queue < 0) or max_body_mb <= 0:
        raise PipelineError(f"serve: --max-queue must be >= 0 and --max-body-mb > 0 (got {max_queue}, {max_body_mb})")
    if grpc_port == port or not 0 <= grpc_port < 2**16:
        raise PipelineError(f"serve: --grpc-port {grpc_port} must be a free port other than --port, or 0 for no gRPC")
    model = Model(folder, instances, threads)
    limits = Limits(QUEUE_PER_INSTANCE * model.count if max_queue is None else max_queue, int(max_body_mb * body.MB))
    variant = model.predictor.manifest.variant
    grpc_address = f"[{host}]:{grpc_port}" if ":" in host else f"{host}:{grpc_port}"
    grpc = f" and gRPC on {grpc_address}" if grpc_port else " (no gRPC)"
    print(
        f"serving {model.name} ({variant}) on http://{host}:{port}/v2{grpc}: {model.how}; up to {limits.queue} "
        f"requests queued, bodies up to {limits.body_bytes / body.MB:g} MiB",
        flush=True,
    )
    app = create_app(model, limits, grpc_address if grpc_port else None)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@dataclass
class Started:
    """A server in a process of its own: its REST and gRPC `host:port` (None: no gRPC), and the file its
    output goes to."""

    process: subprocess.Popen
    url: str
    grpc_url: str | None
    log: Path

    def banner(self) -> str:
        return self.log.read_text().partition("\n")[0]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.unlink(missing_ok=True)


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports free now (another process may take one before it is bound)."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def start(folder: Path, python: str = sys.executable, timeout: float = 120, options: Sequence[str] = ()) -> Started:
    """`python -m pipeline serve folder [options]` on free loopback ports (REST and, unless `options` name a
    --grpc-port, gRPC), with interpreter `python` (a serving environment's), returned once
    /v2/health/ready answers (the gRPC service starts before REST does); its output, if it dies first,
    in the error. For tests and load runs."""
    port, grpc_port = free_ports(2)
    options = list(options)
    if "--grpc-port" in options:
        grpc_port = int(options[options.index("--grpc-port") + 1])
    else:
        options += ["--grpc-port", str(grpc_port)]
    log = Path(tempfile.mkstemp(prefix="serve-", suffix=".log")[1])
    with log.open("w") as out:
        command = [python, "-m", "pipeline", "serve", str(folder), "--port", str(port), *options]
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    grpc_url = f"127.0.0.1:{grpc_port}" if grpc_port else None
    started = Started(process, f"127.0.0.1:{port}", grpc_url, log)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{started.url}/v2/health/ready", timeout=5):
                return started
        except OSError:
            if started.process.poll() is not None or time.monotonic() > deadline:
                started.process.kill()
                raise ModelFileError(f"{folder}: the server did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.2)
