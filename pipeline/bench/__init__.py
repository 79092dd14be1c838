"""The measuring harness: timing loops, statistics, memory and CPU, run in an isolated process."""
