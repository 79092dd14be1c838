"""Run a deploy folder: `predict`, the Open Inference Protocol server and its protocol, the artifact's
tensor signature. These need the runtimes and the manifest only (the lean serving image installs just
that: serving/requirements.txt), no export or benchmark code. `repositories/` writes the Triton, OVMS and
KServe repositories from the measurements (it needs tritonclient's model-config protobuf and jsonschema,
which the pipeline's environment has)."""
