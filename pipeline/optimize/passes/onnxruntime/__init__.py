"""ONNX Runtime passes: the ONNX export as is, graph optimization, FP16, onnxruntime.quantization's INT8, and
onnxruntime-genai's decoders."""
