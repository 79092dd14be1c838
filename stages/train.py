"""DVC stage: train one embedded zoo model (see pipeline.prepare.training)."""

import sys

from pipeline.prepare.training import train_model
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(train_model, ["model"], shared_lock=True))
