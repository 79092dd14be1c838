"""Predict with a deploy folder: runtimes and the manifest only, so a deploy machine needs no export
or benchmark code."""
