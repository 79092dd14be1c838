"""The Open Inference Protocol's (KServe v2) REST bodies: an infer request to arrays, arrays to a
response, with Triton's binary tensor data extension (what `tritonclient.http` sends by default).

A request carries each input as `{name, shape, datatype, data}` (a row-major JSON list) or, when
`parameters.binary_data_size` is set, as raw little-endian bytes after the JSON header, whose length
the `Inference-Header-Content-Length` header gives. Outputs go back as JSON lists unless the request
asks for binary (`parameters.binary_data_output`, or an output's `parameters.binary_data`). JSON
numbers round-trip exactly: a float32 written as the shortest decimal of its double reads back to the
same float32. Every datatype is carried, BYTES and BF16 included (tensors.py says how). Anything
malformed is a `BadRequest`: the server answers 400 with its one line.

Triton's raw binary request (`Inference-Header-Content-Length: 0`: the whole body is the one input's
data, no JSON) is `decode_raw`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.serve import tensors
from pipeline.serve.signature import TensorSpec
from pipeline.serve.tensors import BadRequest

HEADER_LENGTH = "Inference-Header-Content-Length"
__all__ = ["HEADER_LENGTH", "BadRequest", "InferRequest", "answered", "check_input", "decode", "decode_raw", "encode"]


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
    binary, offset = memoryview(body)[split:], 0
    inputs: Arrays = {}
    for tensor in request["inputs"]:
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise BadRequest("an input without a 'name'")
        name, declared = tensor["name"], tensor.get("datatype")
        shape, count, where = check_input(name, tensor.get("shape"), declared, expected)
        size = _parameters(tensor, where).get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= len(binary) - offset:
                raise BadRequest(f"{where}: binary_data_size {size!r} bytes, {len(binary) - offset} left in the body")
            array = tensors.from_binary(declared, binary[offset : offset + size], count, where)
            offset += size
        else:
            array = tensors.from_json(declared, tensor.get("data"), count, where)
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
    asked = {o["name"] for o in outputs if _parameters(o, f"output {o['name']!r}").get("binary_data", everything)}
    return InferRequest(inputs, request.get("id"), asked, [o["name"] for o in outputs])


def encode(
    outputs: Arrays, request: InferRequest, model: str, version: str = "1", datatypes: dict[str, str] | None = None
) -> tuple[bytes, dict[str, str]]:
    """The response body and its headers (the binary extension's header when any output is binary).
    `datatypes` names an output's v2 datatype where its array's dtype does not (BF16 bits in uint16)."""
    described, chunks = [], []
    for name, datatype, value in answered(outputs, request, datatypes):
        tensor: dict[str, Any] = {"name": name, "datatype": datatype, "shape": list(value.shape)}
        if name in request.binary_outputs or "*" in request.binary_outputs:
            raw = tensors.to_binary(datatype, value)
            tensor["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            tensor["data"] = tensors.to_json(datatype, value, f"output {name!r}")
        described.append(tensor)
    response: dict[str, Any] = {"model_name": model, "model_version": version, "outputs": described}
    if request.id is not None:
        response["id"] = request.id
    header = json.dumps(response, allow_nan=True).encode()
    if not chunks:
        return header, {"content-type": "application/json"}
    return header + b"".join(chunks), {"content-type": "application/octet-stream", HEADER_LENGTH: str(len(header))}


def check_input(name: str, shape: Any, datatype: Any, expected: dict[str, str]) -> tuple[list[int], int, str]:
    """An input's shape, element count and name for messages, once its name, shape and datatype
    (`expected`: input name -> v2 datatype) are ones the model takes."""
    if name not in expected:
        raise BadRequest(f"input {name!r}: the model has no such input (inputs: {', '.join(expected)})")
    shape = _shape(shape, name)
    if datatype != expected[name]:
        raise BadRequest(f"input {name!r}: datatype {datatype!r}, the model takes {expected[name]}")
    return shape, int(np.prod(shape)), f"input {name!r}"


def answered(
    outputs: Arrays, request: InferRequest, datatypes: dict[str, str] | None = None
) -> list[tuple[str, str, np.ndarray]]:
    """(name, v2 datatype, array) of each output the request asked for (every one when it named none),
    in its order. `datatypes` names an output's datatype where its array's dtype does not (BF16 bits)."""
    names = request.requested if request.requested is not None else list(outputs)
    chosen = []
    for name in names:
        if name not in outputs:
            raise BadRequest(f"output {name!r}: the model has no such output (outputs: {', '.join(outputs)})")
        value = np.asarray(outputs[name])
        chosen.append((name, (datatypes or {}).get(name) or tensors.datatype_of(value), value))
    return chosen


def decode_raw(body: bytes, spec: TensorSpec) -> InferRequest:
    """Triton's raw binary request: the body is the data of the model's one input `spec` (its batch axis
    already 1), whose shape must follow from the byte count: at most one other dimension of any size;
    BYTES, one element (the body, no length prefix). Every output comes back binary."""
    where = f"a raw binary request ({HEADER_LENGTH}: 0) for input {spec.name!r} of shape {spec.shape}"
    free = [axis for axis, size in enumerate(spec.shape) if size < 0]
    fixed = int(np.prod([size for size in spec.shape if size >= 0]))
    if spec.datatype == "BYTES":
        if free or fixed != 1:
            raise BadRequest(f"{where}: a BYTES input must hold one element for its shape to follow")
        body = tensors.LENGTH.pack(len(body)) + body  # Triton prepends the length too
    elif len(free) > 1:
        raise BadRequest(f"{where}: more than one dimension of any size, so the shape cannot follow from the size")
    shape = list(spec.shape)
    if free:
        row = fixed * tensors.element_dtype(spec.datatype).itemsize
        if not row or len(body) % row:
            raise BadRequest(f"{where}: {len(body)} bytes are not a whole number of {row}-byte slices")
        shape[free[0]] = len(body) // row
    array = tensors.from_binary(spec.datatype, body, int(np.prod(shape)), where)
    return InferRequest({spec.name: array.reshape(shape)}, binary_outputs={"*"})


def _parameters(part: dict, where: str) -> dict:
    parameters = part.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequest(f"{where}: 'parameters' must be an object, got {parameters!r}")
    return parameters


def _shape(shape: Any, name: str) -> list[int]:
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise BadRequest(f"input {name!r}: 'shape' must be a list of non-negative integers, got {shape!r}")
    return shape
