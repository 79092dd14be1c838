"""The model zoo: one folder per model (code, and the files the pipeline reads: weights, data).

The embedded defaults are trained by the `train` DVC stage from data that ships with a package
(scikit-learn's digits) or is generated with a fixed seed: nothing is downloaded.
"""
