"""The Open Inference Protocol's (KServe v2) REST bodies: an infer request to arrays, arrays to a
response, with Triton's binary tensor data extension (what `tritonclient.http` sends by default).

A request carries each input as `{name, shape, datatype, data}` (a row-major JSON list) or, when
`parameters.binary_data_size` is set, as raw little-endian bytes after the JSON header, whose length
the `Inference-Header-Content-Length` header gives. Outputs go back as JSON lists unless the request
asks for binary (`parameters.binary_data_output`, or an output's `parameters.binary_data`). JSON
numbers round-trip exactly: a float32 written as the shortest decimal of its double reads back to the
same float32. Anything malformed is a `BadRequest`: the server answers 400 with its one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.serve.signature import numpy_dtype, v2_datatype

HEADER_LENGTH = "Inference-Header-Content-Length"


class BadRequest(ValueError):
    """A request the protocol or the model cannot take: HTTP 400 with this one line."""


@dataclass
class InferRequest:
    inputs: Arrays
    id: str | None = None
    binary_outputs: set[str] = field(default_factory=set)
    requested: list[str] | None = None  # None: every output


def decode(body: bytes, header_length: str | None, expected: dict[str, str]) -> InferRequest:
    """The request's arrays by name, each checked against its declared shape and the datatype
    `expected` gives for it (input name -> v2 datatype)."""
    try:
        split = int(header_length) if header_length is not None else len(body)
    except ValueError:
        raise BadRequest(f"{HEADER_LENGTH} {header_length!r} is not a number") from None
    if not 0 < split <= len(body):
        raise BadRequest(f"{HEADER_LENGTH} {split} does not fit a body of {len(body)} bytes")
    try:
        request = json.loads(body[:split])
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"the request is not JSON ({error})") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise BadRequest("the request has no 'inputs' list")
    binary, offset = body[split:], 0
    inputs: Arrays = {}
    for tensor in request["inputs"]:
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise BadRequest("an input without a 'name'")
        name = tensor["name"]
        if name not in expected:
            raise BadRequest(f"input {name!r}: the model has no such input (inputs: {', '.join(expected)})")
        shape = _shape(tensor.get("shape"), name)
        declared = tensor.get("datatype")
        if declared != expected[name]:
            raise BadRequest(f"input {name!r}: datatype {declared!r}, the model takes {expected[name]}")
        dtype, count = numpy_dtype(declared), int(np.prod(shape))
        size = _parameters(tensor, f"input {name!r}").get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or size != count * dtype.itemsize or offset + size > len(binary):
                raise BadRequest(
                    f"input {name!r}: binary_data_size {size} bytes, shape {shape} of {declared} needs "
                    f"{count * dtype.itemsize} ({len(binary) - offset} left in the body)"
                )
            array = np.frombuffer(binary, dtype.newbyteorder("<"), count, offset).astype(dtype)
            offset += size
        else:
            array = _from_json(tensor.get("data"), dtype, count, name)
        inputs[name] = array.reshape(shape)
    if offset != len(binary):
        raise BadRequest(f"{len(binary) - offset} bytes of binary data no input claims")
    everything = bool(_parameters(request, "the request").get("binary_data_output", False))
    outputs = request.get("outputs")
    if outputs is None:
        return InferRequest(inputs, request.get("id"), {"*"} if everything else set())
    if not isinstance(outputs, list) or not all(
        isinstance(o, dict) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise BadRequest("'outputs' must be a list of {name, parameters} objects")
    binary = {o["name"] for o in outputs if _parameters(o, f"output {o['name']!r}").get("binary_data", everything)}
    return InferRequest(inputs, request.get("id"), binary, [o["name"] for o in outputs])


def encode(outputs: Arrays, request: InferRequest, model: str, version: str = "1") -> tuple[bytes, dict[str, str]]:
    """The response body and its headers (the binary extension's header when any output is binary)."""
    names = request.requested if request.requested is not None else list(outputs)
    described, chunks = [], []
    for name in names:
        if name not in outputs:
            raise BadRequest(f"output {name!r}: the model has no such output (outputs: {', '.join(outputs)})")
        value = np.asarray(outputs[name])
        tensor: dict[str, Any] = {"name": name, "datatype": v2_datatype(value.dtype), "shape": list(value.shape)}
        if name in request.binary_outputs or "*" in request.binary_outputs:
            raw = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
            tensor["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            tensor["data"] = value.ravel().tolist()
        described.append(tensor)
    response: dict[str, Any] = {"model_name": model, "model_version": version, "outputs": described}
    if request.id is not None:
        response["id"] = request.id
    header = json.dumps(response, allow_nan=True).encode()
    if not chunks:
        return header, {"content-type": "application/json"}
    return header + b"".join(chunks), {"content-type": "application/octet-stream", HEADER_LENGTH: str(len(header))}


def _parameters(part: dict, where: str) -> dict:
    parameters = part.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequest(f"{where}: 'parameters' must be an object, got {parameters!r}")
    return parameters


def _shape(shape: Any, name: str) -> list[int]:
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadRequest(f"input {name!r}: 'shape' must be a list of non-negative integers, got {shape!r}")
    return shape


def _from_json(data: Any, dtype: np.dtype, count: int, name: str) -> np.ndarray:
    if data is None:
        raise BadRequest(f"input {name!r}: no 'data' and no binary_data_size")
    try:
        array = np.asarray(data, dtype=dtype).ravel()
    except (TypeError, ValueError, OverflowError) as error:
        raise BadRequest(f"input {name!r}: 'data' is not a list of {dtype} values ({error})") from None
    if array.size != count:
        raise BadRequest(f"input {name!r}: 'data' holds {array.size} values, its shape needs {count}")
    return array
