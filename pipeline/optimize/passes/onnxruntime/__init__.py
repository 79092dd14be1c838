"""ONNX Runtime passes: the ONNX export as is, graph optimization, FP16, and onnxruntime.quantization's INT8."""
