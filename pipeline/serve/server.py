"""`python -m pipeline serve deploy/<model> --port N`: the deploy folder behind the Open Inference
Protocol (KServe v2 REST), for local use and as a KServe custom predictor.

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
    POST /v2/models/<model>/infer              (also under /versions/1/)
"""

from __future__ import annotations

import asyncio
import queue
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pipeline import __version__
from pipeline.core.data import Arrays
from pipeline.core.errors import ModelFileError
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.machine.fingerprint import cores
from pipeline.serve import protocol
from pipeline.serve.predict import Predictor, load
from pipeline.serve.signature import read_signature

VERSION = "1"


def measured_instances(manifest: Manifest) -> tuple[int, int]:
    """Requests in flight and threads in all, as the bench measured the artifact's concurrent figure;
    without that figure, one request on every core."""
    metrics = manifest.metrics
    concurrent = metrics.throughput_concurrent if metrics else None
    return (concurrent.requests, concurrent.total_threads) if concurrent else (1, cores())


class Model:
    """The deploy folder's predictor and its pool of instances, each used by one request at a time."""

    def __init__(self, folder: Path, instances: int | None = None, threads: int | None = None) -> None:
        manifest = manifest_record.load(folder)
        measured_requests, measured_threads = measured_instances(manifest)
        total = threads or measured_threads
        self.predictor: Predictor = load(folder, total)
        self.name = manifest.model
        sessions, self.how = self.predictor.session.request_sessions(instances or measured_requests, total)
        self.instances: queue.SimpleQueue = queue.SimpleQueue()
        for session in sessions:
            self.instances.put(session)
        self.executor = ThreadPoolExecutor(len(sessions), thread_name_prefix="instance")
        self.signature = read_signature(folder, manifest)
        self.datatypes = {spec.name: spec.datatype for spec in self.signature.inputs}

    def infer(self, inputs: Arrays) -> Arrays:
        """Check, then run on a free instance (called on an executor thread)."""
        checked = self.predictor.check(inputs, source="request")
        session = self.instances.get()
        try:
            return self.predictor.run(checked, session=session)
        finally:
            self.instances.put(session)

    def metadata(self) -> dict[str, Any]:
        manifest = self.predictor.manifest
        return {
            "name": self.name,
            "versions": [VERSION],
            "platform": {"onnxruntime": "onnxruntime_onnx", "openvino": "openvino"}.get(
                manifest.runtime, manifest.runtime
            ),
            "inputs": [asdict(spec) for spec in self.signature.inputs],
            "outputs": [asdict(spec) for spec in self.signature.outputs],
            "parameters": {
                "variant": manifest.variant,
                "runtime": f"{manifest.runtime} {manifest.runtime_version}",
                "measured_on": manifest.machine,
                "sha256": manifest.files.get(manifest.entry, ""),
                "instances": self.how,
            },
        }


def create_app(model: Model) -> FastAPI:
    """The v2 REST routes for one model."""
    app = FastAPI(title=f"{model.name} (Open Inference Protocol)", docs_url=None, redoc_url=None)

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    def known(name: str, version: str | None = None) -> JSONResponse | None:
        if name != model.name:
            return error(404, f"unknown model {name!r}: this server serves {model.name!r}")
        if version not in (None, VERSION):
            return error(404, f"unknown version {version!r} of {name!r}: this server serves version {VERSION}")
        return None

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    async def health() -> dict[str, bool]:
        return {"live": True, "ready": True}

    @app.get("/v2")
    async def server_metadata() -> dict[str, Any]:
        return {"name": "modelopt-pipeline", "version": __version__, "extensions": ["binary_tensor_data"]}

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None) -> Response:
        return known(name, version) or JSONResponse({"name": name, "ready": True})

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    async def model_metadata(name: str, version: str | None = None) -> Response:
        return known(name, version) or JSONResponse(model.metadata())

    @app.post("/v2/models/{name}/infer")
    @app.post("/v2/models/{name}/versions/{version}/infer")
    async def infer(name: str, request: Request, version: str | None = None) -> Response:
        if refused := known(name, version):
            return refused
        body = await request.body()
        try:
            decoded = protocol.decode(body, request.headers.get(protocol.HEADER_LENGTH), model.datatypes)
            outputs = await asyncio.get_running_loop().run_in_executor(model.executor, model.infer, decoded.inputs)
            content, headers = protocol.encode(outputs, decoded, model.name, VERSION)
        except (protocol.BadRequest, ModelFileError) as bad:
            return error(400, str(bad).splitlines()[0])
        return Response(content, headers=headers)

    return app


def serve(folder: Path, host: str, port: int, instances: int | None = None, threads: int | None = None) -> None:
    """Load the deploy folder and serve it until interrupted."""
    import uvicorn

    model = Model(folder, instances, threads)
    variant = model.predictor.manifest.variant
    print(f"serving {model.name} ({variant}) on http://{host}:{port}/v2: {model.how}", flush=True)
    uvicorn.run(create_app(model), host=host, port=port, log_level="warning", access_log=False)


@dataclass
class Started:
    """A server in a process of its own: its `host:port` and the file its output goes to."""

    process: subprocess.Popen
    url: str
    log: Path

    def banner(self) -> str:
        return self.log.read_text().partition("\n")[0]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.unlink(missing_ok=True)


def start(folder: Path, python: str = sys.executable, timeout: float = 120) -> Started:
    """`python -m pipeline serve folder` on a free loopback port, with interpreter `python` (a serving
    environment's), returned once /v2/health/ready answers; its output, if it dies first, in the
    error. For tests and load runs."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = Path(tempfile.mkstemp(prefix="serve-", suffix=".log")[1])
    with log.open("w") as out:
        command = [python, "-m", "pipeline", "serve", str(folder), "--port", str(port)]
        started = Started(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT), f"127.0.0.1:{port}", log)
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
