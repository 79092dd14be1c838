"""DVC stage: export one model to ONNX and freeze its reference data (see pipeline.export)."""

import sys

from pipeline.cli import run_stage
from pipeline.export import export_model

if __name__ == "__main__":
    sys.exit(run_stage(export_model, ["model"]))
