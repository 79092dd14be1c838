"""Read-only views of the results: the summary, the report and its plots, the cross-machine page and
the generated doc tables."""
