"""bfloat16 tensors without a bfloat16 dtype: their 16-bit patterns in uint16 arrays, their values in
float32 at the runtimes.

numpy has no bfloat16 (and the lean serving image has no ml_dtypes), so a bfloat16 tensor travels as its
raw bit patterns, and the runtimes take and give float32, which holds every bfloat16 value exactly.
bfloat16 is float32's upper half, so widening is a 16-bit shift and narrowing rounds the dropped half to
nearest, ties to even (what hardware and ml_dtypes do), keeping NaN a NaN.
"""

from __future__ import annotations

import numpy as np


def to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as the float32 values they stand for, exactly."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def from_float32(values: np.ndarray) -> np.ndarray:
    """The nearest bfloat16 of each value (ties to even) as uint16 bit patterns; NaN stays a quiet NaN."""
    floats = np.require(np.asarray(values, np.float32), requirements="C")  # keeps a 0-d array 0-d
    bits = floats.view(np.uint32)
    rounded = np.asarray((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(floats)
    if nan.any():  # rounding could carry a NaN's payload into the exponent: keep its sign, set the quiet bit
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded
