"""Passes, grouped by backend (onnxruntime/, openvino/, tensorrt, pytorch, tensorflow, jax): each turns the
export (or the source) into an artifact; a text-generation model's passes start from its Hugging Face folder."""
