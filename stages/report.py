"""DVC stage: Markdown reports with plots for every model, and the plot data (see pipeline.report)."""

import sys

from pipeline.cli import run_stage
from pipeline.report import write_reports

if __name__ == "__main__":
    sys.exit(run_stage(write_reports, []))
