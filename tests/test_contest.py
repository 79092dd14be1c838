"""The select step's re-measure: stored figures screen, interleaved timing decides."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pipeline.core.config import ContestConfig, Params
from pipeline.core.stats import Interval
from pipeline.decide import contest
from pipeline.decide.selection import Selection
from pipeline.measure import interleaved
from pipeline.measure.contest import race_in_workers
from pipeline.measure.identity import signature
from tests.helpers import metric, write_build

FAST = ContestConfig(block_seconds=0.01, min_block_calls=3, min_rounds=6, min_seconds=0, max_rounds=40, max_seconds=10)


def busy(seconds: float):
    """A call that takes `seconds` of CPU (a stand-in runtime whose speed we know)."""

    def call() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return call


def params(**contest_config) -> Params:
    spec = {"source": "onnx", "file": "m.onnx", "inputs": {"x": {"shape": ["batch", 1]}}}
    return Params.model_validate(
        {
            "models": ["m"],
            "catalog": {"m": spec},
            "variants": {"slow": {}, "fast": {}, "twin": {}},
            "select": {"contest": FAST.model_dump() | contest_config},
        }
    )


def test_the_re_measure_decides_not_the_noise_in_the_stored_figures(monkeypatch, tmp_path):
    """Noise injected into the stored figures makes `slow` look 10% faster than `fast`; their
    intervals overlap, so both are re-measured side by side, where `fast` really is twice as fast."""
    stored = {"slow": metric(0.36, noise=8.0), "fast": metric(0.40, noise=8.0)}
    calls = {"slow": busy(0.0008), "fast": busy(0.0004)}
    monkeypatch.setattr(contest, "identical_groups", lambda variants, root, model: {v: [v] for v in variants})
    monkeypatch.setattr(
        contest,
        "measure_contenders",
        lambda model, timed, p, root, **kw: interleaved.race({v: calls[v] for v in timed}, "p50", FAST),
    )
    decision = contest.decide("m", stored, params(), tmp_path)
    assert decision.selection.chosen == "slow"  # what the stored figures alone would have deployed
    assert decision.chosen == "fast" and decision.tied == ["fast"]
    ratio = decision.contest["ratio_to_leader"]["slow"]
    assert ratio["verdict"] == "slower" and 1.6 < ratio["low"] <= ratio["ratio"] <= ratio["high"] < 2.4
    assert decision.latency_ms["fast"] == pytest.approx(0.4, rel=0.5)  # the figure that ranked them is recorded
    assert decision.why.startswith("fastest when re-measured side by side")
    # the manifest's reasons follow the contest, not the screen: the screen's winner lost it
    assert set(decision.rejected) == {"slow"} and decision.rejected["slow"].startswith("slower side by side: x")
    assert decision.selection.pareto == ["slow"] and decision.pareto == ["fast"]  # the front on the contest's figures


def test_a_tie_is_broken_by_the_documented_order_and_said(monkeypatch, tmp_path):
    """The same speed: the contest cannot separate them, so fidelity breaks the tie, and the manifest
    line names the other variant with the interval."""
    stored = {"slow": metric(0.40, noise=5.0, cosine=0.999), "fast": metric(0.41, noise=5.0, cosine=0.9999)}
    monkeypatch.setattr(contest, "identical_groups", lambda variants, root, model: {v: [v] for v in variants})
    same = {"slow": busy(0.0004), "fast": busy(0.0004)}
    monkeypatch.setattr(
        contest,
        "measure_contenders",
        lambda model, timed, p, root, **kw: interleaved.race(
            {v: same[v] for v in timed}, "p50", FAST.model_copy(update={"max_rounds": 8})
        ),
    )
    decision = contest.decide("m", stored, params(), tmp_path)
    assert sorted(decision.tied) == ["fast", "slow"] and decision.chosen == "fast"  # the better worst-output fidelity
    assert "tie with slow (±" in decision.why and "chosen by the tie-break" in decision.why
    assert set(decision.rejected) == {"slow"} and decision.rejected["slow"].startswith("tie with fast side by side")


@pytest.mark.parametrize(("median", "chosen"), [(1.573, "slow"), (1.02, "fast")])
def test_a_contender_still_open_at_the_cap_is_tied_only_when_its_median_is_inside_the_tie_band(
    monkeypatch, tmp_path, median, chosen
):
    """A noisy contest that ends at its cap with an interval too wide to separate: a median beyond ±tie_pct
    is undecided and the leader keeps the place (the tie-break once deployed a median x1.573); a median
    inside the band is a difference the contest could not show, so the tie-break decides."""
    stored = {"slow": metric(0.40, noise=5.0, cosine=0.999), "fast": metric(0.41, noise=5.0, cosine=0.9999)}
    monkeypatch.setattr(contest, "identical_groups", lambda variants, root, model: {v: [v] for v in variants})
    ratio = {"ratio": median, "low": 0.9, "high": 2.5, "verdict": "open"}
    monkeypatch.setattr(contest, "measure_contenders", lambda *a, **k: {
        "leader": "slow", "ratio_to_leader": {"fast": ratio}, "latency_ms": {"slow": 0.4, "fast": 0.4 * median},
        "percentile": "p50", "rounds": 295, "seconds": 30.1})  # fmt: skip
    decision = contest.decide("m", stored, params(), tmp_path)
    assert decision.chosen == chosen
    if chosen == "slow":  # the leader: "fast" is better on fidelity, but not shown to be as fast
        assert decision.tied == ["slow"] and decision.why.startswith(
            "the fastest median, undecided against fast by the cap, when re-measured side by side (295 rounds, 30.1 s)"
        )
        assert decision.rejected["fast"] == (
            "undecided side by side: x1.573 of slow (95% CI 0.900-2.500; undecided by the cap, its median beyond ±3%)"
        )
    else:
        assert sorted(decision.tied) == ["fast", "slow"] and "chosen by the tie-break" in decision.why


def test_identical_artifacts_are_timed_once(monkeypatch, tmp_path):
    stored = {"slow": metric(0.40, noise=5.0), "twin": metric(0.39, noise=5.0, size=1.1)}
    monkeypatch.setattr(contest, "identical_groups", lambda variants, root, model: {"twin": ["twin", "slow"]})
    monkeypatch.setattr(contest, "measure_contenders", lambda *a, **k: pytest.fail("one model needs no race"))
    decision = contest.decide("m", stored, params(), tmp_path)
    assert decision.identical == {"slow": "twin"} and "slow is the same model as twin (timed once)" in decision.why


def _artifact(folder: Path, name: str, producer: str, node_name: str) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name=node_name)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, producer_name=producer)
    (folder / name).mkdir(parents=True)
    onnx.save(model, folder / name / "model.onnx")
    write_build(folder / name, variant=name)  # its own name: not part of the signature
    return folder / name


def test_signature_ignores_names_and_metadata_but_not_the_graph(tmp_path):
    a = _artifact(tmp_path, "a", "one", "Relu_1")
    b = _artifact(tmp_path, "b", "two", "Relu_77")  # another producer, other generated node names
    assert signature(a) == signature(b)
    graph = onnx.load(b / "model.onnx")
    graph.graph.node[0].op_type = "Sigmoid"
    onnx.save(graph, b / "model.onnx")
    assert signature(a) != signature(b)


def test_onnx_files_onnx_runtime_runs_as_one_graph_are_one_model(tmp_path):
    """`onnx_opt` is ONNX Runtime's optimized save of `onnx_fp32`: a file whose Identity the runtime removes at
    load, its tensors named otherwise, runs the same graph as the file without it: one model. Other weights,
    or the same file for another runtime's settings, are another."""
    import numpy as np
    from onnx import numpy_helper

    def onnx_file(name: str, weight: float, identity: bool, **build: str) -> Path:
        w = numpy_helper.from_array(np.full(4, weight, np.float32), f"w_{name}")
        first = [helper.make_node("Identity", ["x"], [f"mid_{name}"])] if identity else []
        add = helper.make_node("Add", [f"mid_{name}" if identity else "x", w.name], ["y"])
        graph = helper.make_graph(
            [*first, add],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
            [w],
        )
        (tmp_path / name).mkdir()
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.save(model, tmp_path / name / "model.onnx")
        write_build(tmp_path / name, **build)
        return tmp_path / name

    plain = onnx_file("onnx_opt", 1.0, identity=False)
    exported = onnx_file("onnx_fp32", 1.0, identity=True)
    other = onnx_file("onnx_fp16", 2.0, identity=False)
    assert signature(plain) == signature(exported)
    assert signature(plain) != signature(other)
    assert signature(exported) != signature(onnx_file("onnx_fp32_gpu", 1.0, identity=True, target="cuda"))


def test_byte_identical_openvino_weights_with_other_layer_names_are_one_model(tmp_path):
    """Accuracy control that reverted nothing writes the same IR with other layer names and its settings
    in rt_info: one model. Other weights are another. Built here, so the test runs wherever CI does."""
    import numpy as np
    import openvino as ov
    from openvino import opset13 as ops

    def ir(name: str, weights: np.ndarray, layer: str, note: str) -> Path:
        x = ops.parameter([1, 4], np.float32, name="x")
        product = ops.matmul(x, ops.constant(weights), False, False)
        product.set_friendly_name(layer)
        product.output(0).set_names({"y"})  # outputs are named, as convert_model names them
        output = ops.result(product)
        output.set_friendly_name("y/sink_port_0")
        model = ov.Model([output], [x], "m")
        model.set_rt_info(note, ["nncf", "accuracy_control"])
        (tmp_path / name).mkdir()
        ov.save_model(model, tmp_path / name / "model.xml", compress_to_fp16=False)
        write_build(tmp_path / name, runtime="openvino")
        return tmp_path / name

    weights = np.arange(8, dtype=np.float32).reshape(4, 2)
    plain = ir("openvino_int8", weights, "MatMul_12", "none reverted")
    again = ir("openvino_int8_acc", weights, "MatMul_907", "max_drop 0.01")
    other = ir("openvino_fp32", weights + 1, "MatMul_12", "none reverted")
    assert signature(plain) == signature(again)
    assert signature(plain) != signature(other)


def test_a_slow_models_blocks_shrink_and_its_time_cap_waits_for_rounds():
    settings = ContestConfig()  # 0.01 s blocks of at least 10 calls, at most 0.25 s; 30 rounds by the cap
    assert interleaved.block_calls(0.0001, settings) == 100  # fast: block_seconds' worth
    assert interleaved.block_calls(0.005, settings) == 10  # min_block_calls
    assert interleaved.block_calls(0.14, settings) == 1  # VGG19: one call, not 10 (1.4 s a block)
    assert not interleaved.out_of_time(5, 31.0, settings)  # past max_seconds with 5 rounds: go on
    assert interleaved.out_of_time(30, 31.0, settings)
    assert interleaved.out_of_time(12, settings.cap_max_seconds, settings)  # the stretched cap is hard
    assert interleaved.out_of_time(settings.max_rounds, 1.0, settings)


def test_a_slow_contest_still_separates_its_contenders():
    # 20 ms and 40 ms calls with a 0.3 s cap: the cap waits for cap_min_rounds rounds of one-call blocks
    slow = FAST.model_copy(update={"max_block_seconds": 0.03, "max_seconds": 0.3, "cap_min_rounds": 8})
    result = interleaved.race({"a": busy(0.02), "b": busy(0.04)}, "p50", slow)
    assert result["calls_per_block"] == {"a": 1, "b": 1}
    assert result["rounds"] >= 6 and result["leader"] == "a"
    assert result["ratio_to_leader"]["b"]["verdict"] == "slower"


def test_a_race_too_slow_for_min_rounds_counts_its_verdicts_after_cap_min_rounds():
    settings = FAST.model_copy(update={"min_rounds": 100, "max_seconds": 30, "cap_min_rounds": 30})
    assert interleaved.rounds_needed(10, 0.5, settings) == 100  # 0.05 s a round: 100 rounds in 5 s
    assert interleaved.rounds_needed(10, 3.5, settings) == 30  # 0.35 s a round: 100 rounds take 35 s
    # ~0.13 s a round: 100 rounds would take 13 s, past the 6 s cap; 8 rounds decide x1.5 (below decisive_ratio)
    slow = FAST.model_copy(update={"min_rounds": 100, "max_rounds": 100, "max_seconds": 6, "cap_min_rounds": 8})
    result = interleaved.race({"a": busy(0.01), "b": busy(0.015)}, "p50", slow)
    assert result["stopped_by"] == "every contender separated from the leader or equivalent to it"
    assert result["rounds"] < 40 and result["leader"] == "a"  # long before the cap, not at it


def test_a_generation_is_ranked_on_its_per_token_steps_not_on_the_whole_reply():
    """A decoder's p50 is its time per output token: the contest ranks that, as the screen does, not
    the call's wall clock (which adds a runtime's per-call cost)."""
    from pipeline.runtimes.generator import Generation

    def reply(wall_s: float, step_s: float):
        def call() -> Generation:
            busy(wall_s)()
            return Generation(np.zeros((1, 16), np.int64), step_s, [step_s] * 15)

        return call

    quick_reply_slow_tokens, slow_reply_quick_tokens = reply(0.002, 0.0004), reply(0.006, 0.0002)
    result = interleaved.race({"a": quick_reply_slow_tokens, "b": slow_reply_quick_tokens}, "p50", FAST)
    assert result["leader"] == "b"
    assert result["ratio_to_leader"]["a"]["ratio"] == pytest.approx(2.0)
    assert result["latency_ms"]["b"] == pytest.approx(0.2)


def test_a_gap_beyond_any_drift_ends_the_race_early_and_a_close_one_does_not():
    """Twice as slow is decided after `decisive_rounds`, long before min_rounds and min_seconds; at
    1.25x (within what one ratio has drifted across machine states) the race runs its minimum."""
    patient = FAST.model_copy(update={"min_rounds": 30, "max_rounds": 30, "decisive_rounds": 6})
    far = interleaved.race({"fast": busy(0.0004), "slow": busy(0.0008)}, "p50", patient)
    assert far["rounds"] == 6 and far["stopped_by"].startswith("every contender slower by more than x1.6")
    assert far["ratio_to_leader"]["slow"]["low"] > 1.6
    near = interleaved.race({"fast": busy(0.0004), "slow": busy(0.0005)}, "p50", patient)
    assert near["rounds"] == 30 and near["ratio_to_leader"]["slow"]["verdict"] == "slower"


class Scripted:
    """A contender whose block figures are given (ms, in turn): a race whose intervals the test knows."""

    per_call_s = 0.001

    def __init__(self, *ms: float) -> None:
        self.ms, self.blocks = ms, 0

    def block(self, calls: int) -> tuple[np.ndarray, float]:
        self.blocks += 1
        return np.full(calls, self.ms[(self.blocks - 1) % len(self.ms)] * 1e6), 0.0

    def draw_ms(self) -> list[float]:
        return []


def test_a_contender_beyond_any_drift_leaves_the_race_and_keeps_its_figures_over_the_rounds_it_ran():
    """While a close pair is still open, the one twice as slow leaves after `decisive_rounds`: the later rounds
    time the pair alone; its ratio, verdict and the speed-ups over it (the baseline) are those of its rounds."""
    patient = FAST.model_copy(update={"min_rounds": 30, "max_rounds": 30, "decisive_rounds": 6})
    slow = Scripted(1.0)
    race = interleaved.race({"fast": Scripted(0.4), "near": Scripted(0.5), "slow": slow}, "p50", patient, "slow")
    assert race["rounds"] == 30 and race["retired"] == {"slow": 6} and slow.blocks == 6  # none after it left
    assert race["ratio_to_leader"]["slow"]["ratio"] == pytest.approx(2.5) and race["latency_ms"]["slow"] == 1.0
    assert race["ratio_to_leader"]["slow"]["verdict"] == race["ratio_to_leader"]["near"]["verdict"] == "slower"
    assert race["speedup"]["fast"]["ratio"] == pytest.approx(2.5) and race["speedup"]["slow"]["ratio"] == 1.0


def test_a_race_that_could_not_close_by_its_cap_ends_once_it_has_run_its_minimum():
    """A ratio swinging 0.5x-2x about x1.02: its interval, even narrowed to the 40 rounds of the cap, could neither
    separate nor fit within ±3%, so the race ends after min_rounds, open, as it would have at the cap; a steady
    x1.02 closes (equivalent) and a steady x1.25 separates, each after min_rounds as before."""
    swinging = interleaved.race({"a": Scripted(1.0), "b": Scripted(0.5, 2.0, 1.02)}, "p50", FAST)
    assert swinging["rounds"] == FAST.min_rounds and swinging["stopped_by"].startswith("the open ones could not close")
    assert swinging["ratio_to_leader"]["b"]["verdict"] == "open"
    for steady, said in ((1.02, "equivalent"), (1.25, "slower")):
        race = interleaved.race({"a": Scripted(1.0), "b": Scripted(steady)}, "p50", FAST)
        assert race["rounds"] == FAST.min_rounds and race["ratio_to_leader"]["b"]["verdict"] == said
    near_edge = Interval(1.01, 0.98, 1.04, 30)  # narrowed to 100 rounds: x1.01 ± about 1.6%, inside the band
    assert not interleaved.cannot_close(near_edge, 30, 100, 3.0) and interleaved.cannot_close(near_edge, 30, 31, 3.0)
    unknown = Interval(6.8, 0.0, float("inf"), 4)  # four rounds give no interval yet (the e2e contest's minimum)
    assert not interleaved.cannot_close(unknown, 4, 20, 3.0)


def test_settle_waits_for_a_spinning_pool_and_then_a_quiet_stretch():
    """A thread that spins for 80 ms after the block (a runtime's pool): the contest's next block starts only once
    the process has been quiet for quiet_for_s after it stopped; a quiet process waits that stretch alone."""
    import threading
    import time

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    spinner = threading.Thread(target=spin, args=(0.08,))
    spinner.start()
    quiet = ContestConfig()
    waited = interleaved.settle(quiet)
    spinner.join()
    assert 0.07 + quiet.quiet_for_s <= waited < quiet.settle_cap_s, waited  # it spun from before
    assert quiet.quiet_for_s <= interleaved.settle(quiet) < 0.08, "a quiet process waits the quiet stretch alone"


STUB = [sys.executable, str(Path(__file__).with_name("stub_contest_worker.py"))]


def stub_requests(log: Path, **speeds: float) -> dict[str, dict]:
    return {name: {"name": name, "log": str(log), "per_call_s": s} for name, s in speeds.items()}


def test_the_coordinator_never_runs_two_workers_at_once(tmp_path):
    """Three workers, each writing down when its blocks started and ended (one monotonic clock for the
    machine): no block of one overlaps a block of another, and each worker's figures are its own."""
    log = tmp_path / "blocks.txt"
    result = race_in_workers(stub_requests(log, a=0.0004, b=0.0008, c=0.0004), "p50", FAST, worker_command=STUB)
    spans = sorted((int(start), int(end), name) for name, start, end in (line.split() for line in log.open()))
    assert len(spans) == 3 * result["rounds"] and {name for *_, name in spans} == {"a", "b", "c"}
    for (_, end, before), (start, _, after) in itertools.pairwise(spans):
        assert end <= start, f"{after}'s block started before {before}'s ended"
    assert "worker processes of its own" in result["how"]
    assert result["ratio_to_leader"]["b"]["verdict"] == "slower" and result["leader"] in {"a", "c"}
    assert result["runtime_settings"] == {v: {"stub": v} for v in "abc"} and result["failed"] == {}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_process_draw_is_in_the_interval_not_the_verdict(tmp_path, processes):
    """The same artifact in two contenders whose processes draw their speed at start (one fast, one 1.45x
    slower, as genomad's ONNX trees did): held by one process each, the draw decides ('slower'); held by two
    taking turns, each contender's processes show the draw (the record keeps each one's figure) and no ratio
    within it is called 'slower'."""
    settings = FAST.model_copy(update={"processes": processes})
    requests = stub_requests(tmp_path / "blocks.txt", a=0.0004, b=0.0004)
    requests["a"]["draws"], requests["b"]["draws"] = [0.0004, 0.00058], [0.00058, 0.0004]
    result = race_in_workers(requests, "p50", settings, worker_command=STUB)
    other = next(v for v in "ab" if v != result["leader"])
    verdict = result["ratio_to_leader"][other]["verdict"]
    assert result["processes"] == processes
    if processes == 1:
        assert verdict == "slower", result["ratio_to_leader"]
        assert result["draw_ms"] == {} and result["draw_spread"] == 1.0
    else:
        assert verdict != "slower", result["ratio_to_leader"]
        assert all(len(d) == 2 and max(d) / min(d) > 1.3 for d in result["draw_ms"].values()), result["draw_ms"]
        assert result["draw_spread"] > 1.3 and "2 worker processes of its own taking turns" in result["how"]


def test_the_processes_per_contender_shrink_to_what_memory_holds(monkeypatch):
    """Two processes per contender while two sets fit in half the free memory; one (never none) past that, said."""
    import psutil

    from pipeline.measure.contest import processes_that_fit

    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("Memory", (), {"available": 8000 * 2**20})())
    assert processes_that_fit([500.0, 900.0, None], 2) == (2, "")
    fits, why = processes_that_fit([1500.0, 1500.0], 2)
    assert fits == 1 and "not 2" in why and "3000 MB" in why and "8000 MB free" in why
    assert processes_that_fit([9000.0], 2)[0] == 1


def test_a_worker_that_dies_mid_contest_is_failed_and_the_others_decide(tmp_path):
    """One contender's runtime crashes at its fifth block (its first process's third: two take turns) and another
    cannot load: both are `failed` with their errors, the other two still race to a verdict; select rejects the
    crashed one with its error."""
    requests = stub_requests(tmp_path / "blocks.txt", fast=0.0004, slow=0.0008, crashes=0.0003, broken=0.0003)
    requests["crashes"]["die_at_block"] = 3
    requests["broken"]["fail_load"] = True
    result = race_in_workers(requests, "p50", FAST, baseline="slow", worker_command=STUB)
    assert "Segmentation fault in the stub runtime" in result["failed"]["crashes"]
    assert result["failed"]["crashes"].startswith("failed in round 5")
    assert "cannot load this file" in result["failed"]["broken"]
    assert set(result["latency_ms"]) == {"fast", "slow"} and result["leader"] == "fast"
    assert result["rounds"] >= FAST.min_rounds
    assert result["speedup"]["fast"]["low"] > 1.5 and result["speedup"]["slow"]["ratio"] == 1.0

    rejected = contest._rejected(
        Selection(chosen="fast", why="", pareto=[], rejected={}, feasible=[]),
        "fast",
        result,
        {v: [v] for v in requests},
        FAST.tie_pct,
    )
    assert rejected["crashes"].startswith("failed in the side-by-side re-measure (failed in round 5")
    assert rejected["slow"].startswith("slower side by side")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_contender_opens_rounds_as_often_as_the_others(n):
    """Two contenders alternate who goes first (A B, B A, ...): a race that always opened with the same one
    gave it the coordinator's between-round work to follow, and an A/A pair read 5% apart."""
    names = [chr(ord("a") + i) for i in range(n)]
    rounds = [interleaved.turn(names, r) for r in range(2 * n)]
    assert all(sorted(order) == names for order in rounds)
    firsts = [order[0] for order in rounds]
    assert {name: firsts.count(name) for name in names} == dict.fromkeys(names, 2)
