"""Passes, grouped by backend (onnxruntime/, openvino/, tensorrt, pytorch, tensorflow, jax, decoder):
each turns the export (or the source) into an artifact."""
