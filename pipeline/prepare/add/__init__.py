"""`python -m pipeline add NAME PATH`: a model in one command.

The file already says what a catalog entry spells out. What PATH is decides who reads it
(pipeline.prepare.add.inspect, one module per kind): an ONNX graph's inputs (names, dtypes, fixed and
symbolic dims, token inputs and their vocabulary) and whether it is already quantized; a Hugging Face
folder's task (config.json's `architectures`) and the inputs its config implies; a `.keras` file's
input layers; a SavedModel folder's serving signature; a PyTorch or JAX factory in a .py file with its
weights and the input flags. `--eval` rows are checked against that entry, or text tokenized
(eval_data). The command (command.add_model) writes models/NAME/ (the file, its external weights,
`--eval` data), the entry and NAME in `models` (params.yaml's comments kept: params_text), checks them
as `python -m pipeline check` would and versions the model files with `dvc add` (git gets the small
.dvc file, DVC's cache the weights); the CLI then writes the stage files and prints what it inferred.

Nothing is half-written (transaction): the folder is built aside and moved in, params.yaml is replaced
in one rename once everything passed, and a failure removes what was made. Every problem is one line
naming the path and what is wrong (pipeline.core.errors.PipelineError).
"""
