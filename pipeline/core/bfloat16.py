"""bfloat16 tensors where numpy has no bfloat16 dtype: their 16-bit patterns in uint16 arrays (the
protocol's bytes), their values in float32 at the runtimes (float32 holds every bfloat16 exactly).

The conversions are ml_dtypes' (the bfloat16 numpy type JAX, TensorFlow and ONNX use): round to nearest,
ties to even, NaN kept a NaN.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


def to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as the float32 values they stand for, exactly."""
    return np.asarray(bits, np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)


def from_float32(values: np.ndarray) -> np.ndarray:
    """The nearest bfloat16 of each value as uint16 bit patterns."""
    return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
