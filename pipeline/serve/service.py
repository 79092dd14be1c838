"""The served model (`Model`: the deploy folder's predictor and its instances) and what the REST front
(server.py) and the gRPC front (grpc_service.py) share of it (`Service`: one bounded queue, admission.py, and one
set of counters, metrics.py), below both so that neither front imports the other's names."""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from pipeline import __version__
from pipeline.core import bfloat16
from pipeline.core.data import Arrays
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.machine.fingerprint import cores
from pipeline.serve import body, errors, protocol
from pipeline.serve.admission import Admission
from pipeline.serve.errors import HTTPError
from pipeline.serve.metrics import Metrics
from pipeline.serve.predict import Predictor, load
from pipeline.serve.protocol import InferRequest
from pipeline.serve.signature import TensorSpec, read_signature

VERSION = "1"
MAX_BODY_MB = 64  # --max-body-mb's default
SERVER = {"name": "modelopt-pipeline", "version": __version__, "extensions": ["binary_tensor_data"]}
T = TypeVar("T")


def measured_instances(manifest: Manifest) -> tuple[int, int]:
    """Requests in flight and threads in all, as the bench measured the artifact's concurrent figure;
    without that figure, one request on every core."""
    metrics = manifest.metrics
    concurrent = metrics.throughput_concurrent if metrics else None
    return (concurrent.requests, concurrent.total_threads) if concurrent else (1, cores())


class Model:
    """The deploy folder's predictor and its pool of instances, each used by one request at a time."""

    version = VERSION

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
        self.count = len(sessions)
        self.executor = ThreadPoolExecutor(self.count, thread_name_prefix="instance")
        self.signature = read_signature(folder, manifest)
        self.datatypes = {spec.name: spec.datatype for spec in self.signature.inputs}
        self.output_datatypes = {spec.name: spec.datatype for spec in self.signature.outputs}

    def busy(self) -> int:
        """Instances running a request now."""
        return self.count - self.instances.qsize()

    def known(self, name: str, version: str | None = None) -> None:
        """Nothing when this server serves model `name` at `version` (None: any), else a 404."""
        if name != self.name:
            raise HTTPError(404, f"unknown model {name!r}: this server serves {self.name!r}")
        if version not in (None, VERSION):
            raise HTTPError(404, f"unknown version {version!r} of {name!r}: this server serves version {VERSION}")

    def decode(self, content: bytes, header_length: str | None) -> protocol.InferRequest:
        """The request's arrays: a JSON header (and binary tensors), or Triton's raw binary body."""
        if header_length is not None and header_length.strip() == "0":
            return protocol.decode_raw(content, self.raw_input())
        return protocol.decode(content, header_length, self.datatypes)

    def raw_input(self) -> TensorSpec:
        """The one input a raw binary body feeds, its batch axis 1 (as Triton takes a batching model's)."""
        if len(self.signature.inputs) != 1:
            names = ", ".join(spec.name for spec in self.signature.inputs)
            raise protocol.BadRequest(
                f"a raw binary request ({protocol.HEADER_LENGTH}: 0) feeds a model of one input; "
                f"{self.name} takes {len(self.signature.inputs)} ({names}): send a JSON header"
            )
        spec = self.signature.inputs[0]
        declared, shape = self.predictor.inputs[spec.name], list(spec.shape)
        if declared.shape and isinstance(declared.shape[declared.batch_axis], str):
            shape[declared.batch_axis] = 1
        return TensorSpec(spec.name, spec.datatype, shape)

    def infer(self, inputs: Arrays) -> Arrays:
        """Check, then run on a free instance (called on an executor thread). BF16 tensors arrive and
        leave as bits; the checks and the runtimes see their float32 values (pipeline.core.bfloat16)."""
        inputs = {k: bfloat16.to_float32(v) if self.datatypes.get(k) == "BF16" else v for k, v in inputs.items()}
        checked = self.predictor.check(inputs, source="request")
        session = self.instances.get()
        try:
            outputs = self.predictor.run(checked, session=session)
        finally:
            self.instances.put(session)
        bf16 = {name for name, datatype in self.output_datatypes.items() if datatype == "BF16"}
        return {k: bfloat16.from_float32(v) if k in bf16 else v for k, v in outputs.items()}

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


@dataclass(frozen=True)
class Limits:
    """What the server takes at once: requests waiting beyond the instances, and a body's bytes."""

    queue: int
    body_bytes: int = MAX_BODY_MB * body.MB


class Service:
    """What the REST and gRPC fronts share: the model, one bounded queue (admission.py) and one set of
    counters (metrics.py), whichever transport a request came by. Used on the event loop only."""

    def __init__(self, model: Model, limits: Limits) -> None:
        self.model, self.limits, self.server = model, limits, SERVER
        self.admission = Admission(model.count, limits.queue)
        self.metrics = Metrics(model.name, VERSION, lambda: max(0, self.admission.inside - model.busy()), model.busy)

    async def infer(
        self, decode: Callable[[], Awaitable[InferRequest]], encode: Callable[[Arrays, InferRequest], T]
    ) -> T:
        """Admit the request (or refuse it: 503), decode it, run it on a free instance, encode its answer;
        counted as a success or by its failure's status."""
        started = time.perf_counter()
        try:
            with self.admission:
                decoded = await decode()
                run = asyncio.get_running_loop().run_in_executor
                outputs = await run(self.model.executor, self.model.infer, decoded.inputs)
                answer = encode(outputs, decoded)
        except Exception as error:
            self.metrics.failed(errors.status_of(error))
            raise
        self.metrics.succeeded(time.perf_counter() - started)
        return answer
