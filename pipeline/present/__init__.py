"""Read-only views of the results: the summary, the report and its plots, and the cross-machine page.
They read what the stages recorded, never the build or bench code (a pyproject.toml contract)."""
