"""What predict's value checks cost: check_input_values on a batch of 32 rows of 64 tokens.

The goal is a cost that is small next to inference. One process, no model: valid token inputs as a
tokenizer gives them (input_ids in a 30,522-id vocabulary, a padded attention_mask, token_type_ids)
and a float32 input of the same shape; each check is called `--number` times per round, the median
of `--rounds` rounds is reported per call, beside the shape and dtype checks (check_inputs) predict
already ran. Compare with the recorded time of one batch of 32 (`throughput_sps.by_batch.b32` of a
variant in reports/details/minilm_l6/), printed when present. Runs in seconds:
    python -m benchmarks.value_checks [--rounds 7] [--number 2000] [--out FILE]

`--smoke`: one round of 10 calls each (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from pathlib import Path

from benchmarks.smoke import written_to
from pipeline.core import records
from pipeline.core.config import InputSpec
from pipeline.core.data import generate_inputs
from pipeline.core.files import write_json
from pipeline.core.inputs import check_input_values, check_inputs

ROWS, SEQ, VOCAB = 32, 64, 30522
TOKENS = {
    "input_ids": InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_ids", high=VOCAB),
    "attention_mask": InputSpec(shape=["batch", "seq"], dtype="int64", kind="attention_mask"),
    "token_type_ids": InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_type_ids"),
}
FLOATS = {"features": InputSpec(shape=["batch", "seq"], dtype="float32")}


def per_call_us(call, rounds: int, number: int) -> float:
    return statistics.median(timeit.repeat(call, repeat=rounds, number=number)) / number * 1e6


def batch_ms(model: str = "minilm_l6") -> dict[str, float]:
    """Milliseconds per batch of 32 as the benchmark recorded them, by variant (empty if none)."""
    found = {}
    for variant, record in records.load(model).items():
        sps = record.throughput_sps.by_batch.get(f"b{ROWS}") if record.throughput_sps else None
        if sps:
            found[variant] = 1000 * ROWS / sps
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="one round of 10 calls: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, Path("reports/benchmarks/value_checks.json"), args.smoke)
    if args.smoke:
        args.rounds, args.number = 1, 10
    tokens = generate_inputs(TOKENS, ROWS, 0, {"seq": SEQ})
    floats = generate_inputs(FLOATS, ROWS, 0, {"seq": SEQ})
    bounds = {"input_ids": VOCAB, "token_type_ids": 2}
    timed = {
        "token_values_us": lambda: check_input_values(tokens, TOKENS, "x.npz", bounds),
        "float_values_us": lambda: check_input_values(floats, FLOATS, "x.npz", {}),
        "token_shapes_us": lambda: check_inputs(tokens, TOKENS, "x.npz"),
    }
    result: dict = {"rows": ROWS, "seq": SEQ, "rounds": args.rounds, "number": args.number}
    result |= {name: round(per_call_us(call, args.rounds, args.number), 2) for name, call in timed.items()}
    recorded = batch_ms()
    if recorded:
        result["recorded_batch_ms"] = {k: round(v, 1) for k, v in recorded.items()}
        result["recorded_on"] = records.load_env().get("machine", {}).get("name", "?")
        fastest = min(recorded.values())
        result["token_checks_vs_fastest_batch_pct"] = round(100 * result["token_values_us"] / 1000 / fastest, 4)
    for key, value in result.items():
        print(f"{key}: {value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, result)


if __name__ == "__main__":
    main()
