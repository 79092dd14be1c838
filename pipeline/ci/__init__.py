"""The regression gate and its paired re-measurement."""
