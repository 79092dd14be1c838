"""DVC stage: train one embedded zoo model (see pipeline.training)."""

import sys

from pipeline.stage_runner import run_stage
from pipeline.training import train_model

if __name__ == "__main__":
    sys.exit(run_stage(train_model, ["model"], shared_lock=True))
