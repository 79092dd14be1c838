"""Passes: one module per transformation, each turning the export (or the source) into an artifact."""
