"""From a source model to what every variant starts from: training, the ONNX export, the reference data."""
