"""The Open Inference Protocol's gRPC form (KServe's `grpc-v2`) beside REST in `python -m pipeline serve`
(`--grpc-port`, 8001 by default as Triton's), on the same model, queue and counters (service.Service).

Triton's `inference.GRPCInferenceService` is KServe v2's gRPC service (the same package, messages and
method names) with more methods. Its generated stubs ship in the base tritonclient package
(tritonclient.grpc's service_pb2 and service_pb2_grpc; the [grpc] extra, whose protobuf<7 this
environment cannot take, only adds grpcio and protobuf), and grpc.aio serves them on the event loop
uvicorn runs, so REST and gRPC requests wait in one bounded queue that needs no lock.

    ServerLive, ServerReady                     always true while the server runs
    ModelReady                                  true for this model (version "" or 1), false for another
    ServerMetadata, ModelMetadata               what GET /v2 and /v2/models/<model> answer (the v2 gRPC
                                                metadata has no parameters)
    ModelInfer                                  inputs from raw_input_contents (what tritonclient.grpc
                                                sends: one entry an input, laid out as the binary
                                                extension lays it, BYTES elements length-prefixed), or
                                                from the typed `contents` (FP16 and BF16 have no typed
                                                field: raw only); every output in raw_output_contents,
                                                as Triton answers
    any other method (streaming, repository, shared memory, statistics, trace, logging, model config)
                                                UNIMPLEMENTED

Every error is a status and the one line REST answers with (errors.py): INVALID_ARGUMENT where REST says
400, NOT_FOUND 404, UNAVAILABLE 503 (the queue is full, as Triton answers it; `--max-body-mb` also bounds
a received message, and grpc itself refuses a larger one with RESOURCE_EXHAUSTED before it reaches a method),
UNIMPLEMENTED, and INTERNAL for anything uncaught (logged with its traceback; the server keeps serving).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

from pipeline.core.data import Arrays
from pipeline.core.errors import PipelineError
from pipeline.serve import errors, protocol, tensors
from pipeline.serve.errors import HTTPError
from pipeline.serve.tensors import BadRequest

if TYPE_CHECKING:
    import numpy as np

    from pipeline.serve.service import Model, Service

GRACE_S = 5  # on shutdown, how long calls in flight may finish
SERVICE = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
CODES = {  # the REST status an error is answered with -> the gRPC status; anything else INTERNAL
    400: grpc.StatusCode.INVALID_ARGUMENT,
    404: grpc.StatusCode.NOT_FOUND,
    501: grpc.StatusCode.UNIMPLEMENTED,
    503: grpc.StatusCode.UNAVAILABLE,  # as Triton answers a full queue: the status gRPC retry policies retry
}
CONTENTS = {  # a datatype's typed field in InferTensorContents (FP16 and BF16 have none)
    "BOOL": "bool_contents",
    **dict.fromkeys(("INT8", "INT16", "INT32"), "int_contents"),
    "INT64": "int64_contents",
    **dict.fromkeys(("UINT8", "UINT16", "UINT32"), "uint_contents"),
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
SHARED_MEMORY = "shared_memory_region"
log = logging.getLogger("uvicorn.error")  # where the REST server's tracebacks go

Handler = Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[Any]]


async def start(service: Service, address: str) -> grpc.aio.Server:
    """The service listening on `address` (host:port) on the running event loop, its received messages
    up to the server's body limit."""
    options = [
        ("grpc.max_receive_message_length", service.limits.body_bytes),
        ("grpc.so_reuseport", 0),  # a port another server holds is an error, not a port shared with it
    ]
    server = grpc.aio.server(options=options)
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(service), server)
    try:
        server.add_insecure_port(address)
    except RuntimeError as error:
        raise PipelineError(f"serve: gRPC cannot listen on {address} ({error}): another --grpc-port, or 0") from None
    await server.start()
    return server


def decode(request: pb.ModelInferRequest, expected: dict[str, str]) -> protocol.InferRequest:
    """The request's arrays by name, checked as REST checks them (protocol.check_input); `expected`:
    input name -> v2 datatype."""
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise BadRequest(
            f"{len(raw)} raw_input_contents for {len(request.inputs)} inputs: one for each input, in order, or none"
        )
    inputs: Arrays = {}
    for index, tensor in enumerate(request.inputs):
        shape, count, where = protocol.check_input(tensor.name, list(tensor.shape), tensor.datatype, expected)
        if SHARED_MEMORY in tensor.parameters:
            raise BadRequest(f"{where}: shared memory is not served: send the data in the request")
        if raw:
            if tensor.HasField("contents"):
                raise BadRequest(f"{where}: typed contents in a request with raw_input_contents: one or the other")
            array = tensors.from_binary(tensor.datatype, raw[index], count, where)
        else:
            array = from_contents(tensor.datatype, tensor.contents, count, where)
        inputs[tensor.name] = array.reshape(shape)
    for output in request.outputs:
        if SHARED_MEMORY in output.parameters:
            raise BadRequest(f"output {output.name!r}: shared memory is not served: the output comes in the response")
    return protocol.InferRequest(inputs, request.id or None, requested=[o.name for o in request.outputs] or None)


def from_contents(datatype: str, contents: pb.InferTensorContents, count: int, where: str) -> np.ndarray:
    """`count` elements from the datatype's typed field."""
    field = CONTENTS.get(datatype)
    if field is None:
        raise BadRequest(f"{where}: {datatype} has no typed contents field: send it in raw_input_contents")
    return tensors.from_values(datatype, list(getattr(contents, field)), count, where, f"contents.{field}")


def encode(outputs: Arrays, request: protocol.InferRequest, model: Model) -> pb.ModelInferResponse:
    """The outputs the request asked for, each in raw_output_contents."""
    response = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=request.id or "")
    for name, datatype, value in protocol.answered(outputs, request, model.output_datatypes):
        response.outputs.add(name=name, datatype=datatype, shape=value.shape)
        response.raw_output_contents.append(tensors.to_binary(datatype, value))
    return response


def rpc(method: Handler) -> Handler:
    """A method answering every error with its status and one line, each answer counted by its code."""
    name = method.__name__

    @functools.wraps(method)
    async def answer(self: InferenceService, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            response = await method(self, request, context)
        except Exception as error:
            code = CODES.get(errors.status_of(error), grpc.StatusCode.INTERNAL)
            line = errors.one_line(error, name)
            if code == grpc.StatusCode.INTERNAL:
                log.exception("gRPC %s: %s", name, line)
            self.service.metrics.grpc_responses.labels(code.name).inc()
            await context.abort(code, line)
        self.service.metrics.grpc_responses.labels(grpc.StatusCode.OK.name).inc()
        return response

    return answer


class InferenceService(service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, service: Service) -> None:
        self.service, self.model = service, service.model

    @rpc
    async def ServerLive(self, request: pb.ServerLiveRequest, context: Any) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    @rpc
    async def ServerReady(self, request: pb.ServerReadyRequest, context: Any) -> pb.ServerReadyResponse:
        return pb.ServerReadyResponse(ready=True)

    @rpc
    async def ModelReady(self, request: pb.ModelReadyRequest, context: Any) -> pb.ModelReadyResponse:
        try:
            self.model.known(request.name, request.version or None)
        except HTTPError:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    @rpc
    async def ServerMetadata(self, request: pb.ServerMetadataRequest, context: Any) -> pb.ServerMetadataResponse:
        return pb.ServerMetadataResponse(**self.service.server)

    @rpc
    async def ModelMetadata(self, request: pb.ModelMetadataRequest, context: Any) -> pb.ModelMetadataResponse:
        self.model.known(request.name, request.version or None)
        metadata = self.model.metadata()
        return pb.ModelMetadataResponse(
            name=metadata["name"],
            versions=metadata["versions"],
            platform=metadata["platform"],
            inputs=[pb.ModelMetadataResponse.TensorMetadata(**spec) for spec in metadata["inputs"]],
            outputs=[pb.ModelMetadataResponse.TensorMetadata(**spec) for spec in metadata["outputs"]],
        )

    @rpc
    async def ModelInfer(self, request: pb.ModelInferRequest, context: Any) -> pb.ModelInferResponse:
        model = self.model
        model.known(request.model_name, request.model_version or None)

        async def decoded() -> protocol.InferRequest:
            return decode(request, model.datatypes)

        return await self.service.infer(decoded, lambda outputs, asked: encode(outputs, asked, model))


def unimplemented(name: str) -> Handler:
    async def refuse(self: InferenceService, request: Any, context: Any) -> None:
        raise HTTPError(501, f"{name}: not served here (this server answers {', '.join(SERVED)})")

    refuse.__name__ = refuse.__qualname__ = name
    return rpc(refuse)


SERVED = [method.name for method in SERVICE.methods if method.name in InferenceService.__dict__]
for _method in SERVICE.methods:  # every other method the stubs define: UNIMPLEMENTED
    if _method.name not in SERVED:
        setattr(InferenceService, _method.name, unimplemented(_method.name))
