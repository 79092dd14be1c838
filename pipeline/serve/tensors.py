"""A v2 tensor's elements in the protocol's two forms, for every datatype: JSON lists and the binary
tensor extension's little-endian bytes (Triton's extension_binary_data.md).

Two datatypes have no plain numpy counterpart, so they get a carrier:
- BYTES: a numpy object array of `bytes`. Binary: each element a 4-byte little-endian length, then its
  bytes. JSON: a list of strings (UTF-8), which is all JSON can hold.
- BF16: a uint16 array of the bit patterns (numpy has no bfloat16; pipeline.core.bfloat16 converts).
  Binary: 2 bytes an element. JSON: the numbers they stand for.
Every other datatype is its numpy dtype (signature.numpy_dtype). Anything malformed is a `BadRequest`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from pipeline.core import bfloat16
from pipeline.serve.signature import numpy_dtype, v2_datatype

LENGTH = struct.Struct("<I")  # a BYTES element's length prefix


class BadRequest(ValueError):
    """A request the protocol or the model cannot take: HTTP 400 with this one line."""


def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype of an array a runtime returned (strings and bytes, in any numpy form: BYTES)."""
    return "BYTES" if array.dtype.kind in "OSU" else v2_datatype(array.dtype)


def element_dtype(datatype: str) -> np.dtype | None:
    """The little-endian dtype of one binary element; None for BYTES (elements of their own length)."""
    if datatype == "BYTES":
        return None
    return np.dtype("<u2") if datatype == "BF16" else numpy_dtype(datatype).newbyteorder("<")


def from_binary(datatype: str, data: bytes | memoryview, count: int, where: str) -> np.ndarray:
    """`count` elements (a flat array in the datatype's carrier) from exactly the bytes `data` holds."""
    dtype = element_dtype(datatype)
    if dtype is not None:
        if len(data) != count * dtype.itemsize:
            needed = count * dtype.itemsize
            raise BadRequest(f"{where}: {len(data)} bytes of binary data, {count} {datatype} elements need {needed}")
        return np.frombuffer(data, dtype, count).astype(dtype.newbyteorder("="))
    view, offset, items = memoryview(data), 0, []
    for index in range(count):
        if offset + LENGTH.size > len(view):
            raise BadRequest(f"{where}: the binary data ends before BYTES element {index} of {count}")
        (length,) = LENGTH.unpack_from(view, offset)
        offset += LENGTH.size
        if offset + length > len(view):
            raise BadRequest(f"{where}: BYTES element {index} claims {length} bytes, {len(view) - offset} are left")
        items.append(bytes(view[offset : offset + length]))
        offset += length
    if offset != len(view):
        raise BadRequest(f"{where}: {len(view) - offset} bytes of binary data after its {count} BYTES elements")
    return _objects(items)


def to_binary(datatype: str, array: np.ndarray) -> bytes:
    """The array's elements in the binary extension's form (BF16: uint16 bits; BYTES: any strings)."""
    dtype = element_dtype(datatype)
    if dtype is None:
        return b"".join(LENGTH.pack(len(item)) + item for item in map(_as_bytes, np.asarray(array).ravel()))
    return np.ascontiguousarray(array, dtype).tobytes()


def from_json(datatype: str, data: Any, count: int, where: str) -> np.ndarray:
    """`count` elements (a flat array in the datatype's carrier) from a JSON list, nested or flat."""
    if data is None:
        raise BadRequest(f"{where}: no 'data' and no binary_data_size")
    return from_values(datatype, data, count, where, "'data'")


def from_values(datatype: str, values: Any, count: int, where: str, field: str) -> np.ndarray:
    """`count` elements from a list of values, nested or flat, that the request's `field` held (JSON's
    'data', gRPC's typed contents): BYTES elements are strings (UTF-8) or bytes, BF16 the numbers."""
    try:
        if datatype == "BYTES":
            items = np.asarray(values, dtype=object).ravel()
            if not all(isinstance(item, str | bytes) for item in items):
                raise ValueError("BYTES elements are strings")
            array = _objects([item if isinstance(item, bytes) else item.encode() for item in items])
        elif datatype == "BF16":
            array = bfloat16.from_float32(np.asarray(values, np.float32).ravel())
        else:
            array = np.asarray(values, dtype=numpy_dtype(datatype)).ravel()
    except (TypeError, ValueError, OverflowError) as error:
        raise BadRequest(f"{where}: {field} is not a list of {datatype} values ({error})") from None
    if array.size != count:
        raise BadRequest(f"{where}: {field} holds {array.size} values, its shape needs {count}")
    return array


def to_json(datatype: str, array: np.ndarray, where: str) -> list:
    """The array's elements as a flat JSON list (BYTES: strings, so they must be UTF-8)."""
    flat = np.asarray(array).ravel()
    if datatype == "BF16":
        return bfloat16.to_float32(flat).tolist()
    if datatype != "BYTES":
        return flat.tolist()
    try:
        return [item.decode() for item in map(_as_bytes, flat)]
    except UnicodeDecodeError:
        raise BadRequest(f"{where}: BYTES that are not UTF-8 cannot be JSON: ask for it as binary data") from None


def _as_bytes(item: Any) -> bytes:
    """A BYTES element: bytes as they are, str (ONNX Runtime's and OpenVINO's strings) in UTF-8."""
    return item if isinstance(item, bytes) else str(item).encode()


def _objects(items: list[bytes]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array
