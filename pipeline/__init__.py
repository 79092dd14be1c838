"""Model optimization and export pipeline: source model -> ONNX -> optimized variants -> benchmarks.

All logic lives in this package; the DVC stages in `stages/` are thin entry points into it.
Heavy frameworks (torch, onnxruntime, openvino, tensorflow, jax) are imported lazily, inside the
module that needs them, so that a stage only pays for the runtime it uses.
"""

import os

__version__ = "0.1.0"

# TensorFlow's C++ logging prints pages of notices (CPU features, oneDNN) to every stage's output;
# errors still show. Set TF_CPP_MIN_LOG_LEVEL yourself to see more.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
