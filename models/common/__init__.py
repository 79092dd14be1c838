"""Helpers shared by the zoo's training scripts."""
