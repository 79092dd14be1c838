"""This machine: its fingerprint, its name, its target probes and the lock a benchmark holds alone."""
