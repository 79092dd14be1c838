"""DVC stage: export one model to ONNX and freeze its reference data (see pipeline.prepare.export)."""

import sys

from pipeline.prepare.export import export_model
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(export_model, ["model"], shared_lock=True))
