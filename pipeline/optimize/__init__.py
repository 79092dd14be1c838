"""The build stage: one pass per variant, each variant's plan (params and code hash)."""
