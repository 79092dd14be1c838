"""The bench stage: timing, memory, CPU, energy and operator profiles of one built variant."""
