"""A causal LM as a stateful ov.Model, as optimum-intel exports decoders for openvino-genai.

The PyTorch front end converts it with explicit past key/values, which OpenVINO's MakeStateful
transformation then turns into model state, with a `beam_idx` input reordering it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline.optimize.passes.base import BuildContext

if TYPE_CHECKING:
    import openvino as ov


def convert_stateful(ctx: BuildContext) -> ov.Model:
    """The decoder as a stateful ov.Model: inputs input_ids, attention_mask, position_ids, beam_idx;
    output logits; the KV cache as model state (what openvino-genai's LLMPipeline runs)."""
    import openvino as ov
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(ctx.hf_folder, dtype=torch.float32, local_files_only=True).eval()
    family = ctx.family
    layers, kv_heads, head_dim = family.layers or 0, family.kv_heads or 0, family.head_dim or 0

    class WithPast(torch.nn.Module):
        """The past key/values as plain tensors in and out: what a tracer can follow."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past: list[Any]) -> Any:
            cache = DynamicCache(config=model.config)
            for layer, (keys, values) in zip(cache.layers, zip(past[::2], past[1::2], strict=True), strict=True):
                layer.lazy_initialization(keys, values)
                layer.keys, layer.values = keys, values
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)  # fmt: skip
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    batch, past, new = 2, 3, 4  # none of size 1: the tracer keeps every axis dynamic
    example = {
        "input_ids": torch.ones(batch, new, dtype=torch.long),
        "attention_mask": torch.ones(batch, past + new, dtype=torch.long),
        "position_ids": torch.arange(past, past + new).expand(batch, new),
        "past": [torch.zeros(batch, kv_heads, past, head_dim) for _ in range(2 * layers)],
    }
    with torch.no_grad():
        converted = ov.convert_model(WithPast(), example_input=example)
    names = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    for port, name in zip(converted.inputs, ["input_ids", "attention_mask", "position_ids", *names], strict=True):
        port.get_tensor().set_names({name})
    presents = [name.replace("past_key_values", "present") for name in names]
    for port, name in zip(converted.outputs, ["logits", *presents], strict=True):
        port.get_tensor().set_names({name})
    make_stateful(converted, dict(zip(names, presents, strict=True)))
    return converted


def make_stateful(model: ov.Model, past_to_present: dict[str, str]) -> None:
    """KV-cache inputs and outputs become model state: a `beam_idx` input gathers the cache rows
    (beam search and batch reordering), the state starts empty at the input's batch size."""
    import numpy as np
    import openvino as ov
    from openvino import opset13
    from openvino._offline_transformations import apply_make_stateful_transformation

    batch = model.input("input_ids").get_partial_shape()[0]
    beam_idx = opset13.parameter(name="beam_idx", dtype=ov.Type.i32, shape=ov.PartialShape([batch]))
    beam_idx.output(0).get_tensor().add_names({"beam_idx"})
    model.add_parameters([beam_idx])
    for name in past_to_present:
        port = model.input(name)
        consumers = port.get_target_inputs()  # before the Gather becomes one
        gathered = opset13.gather(port, beam_idx, opset13.constant(0))
        for consumer in consumers:
            consumer.replace_source_output(gathered.output(0))
    model.validate_nodes_and_infer_types()
    apply_make_stateful_transformation(model, past_to_present)
    rows = opset13.gather(opset13.shape_of(model.input("input_ids"), output_type="i64"), opset13.constant([0]),
                          opset13.constant(0))  # fmt: skip
    for op in model.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [rows if axis == 0 else opset13.constant(np.array([d.min_length], dtype=np.int64))
                    for axis, d in enumerate(op.get_output_partial_shape(0))]  # fmt: skip
            zero = opset13.constant(0.0, dtype=op.get_output_element_type(0))
            op.set_arguments([opset13.broadcast(zero, opset13.concat(dims, 0))])
    model.validate_nodes_and_infer_types()
