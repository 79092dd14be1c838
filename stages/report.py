"""DVC stage: Markdown reports with plots for every model, and the plot data (see pipeline.present.report)."""

import sys

from pipeline.present.report import write_reports
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_reports, []))
