"""What every phase stands on: the params schema, paths, files, errors, arrays, fidelity math, child
processes, the typed records and the registry. Imports nothing above it."""
