"""DVC stage (always run): write the software fingerprint the shared builds depend on."""

import sys

from pipeline.fingerprint import write_software
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_software, []))
