"""The v2 server under load: N concurrent clients for T seconds against `python -m pipeline serve`, on
loopback, with bad requests mixed in, compared with the same artifact's concurrent throughput measured
in process the way the bench stage measures it (before and after the load, in this run).

    python -m benchmarks.serving_load deploy/minilm_l6 --clients 8 --seconds 60 --python /tmp/lean/bin/python

Each client is a thread with its own Triton client (Triton's official clients): `tritonclient.http`
(binary tensors, keep-alive) by default, `tritonclient.grpc` (raw tensor contents, a channel each) with
`--protocol grpc`; batch-1 requests back to back. Every `--bad-every`-th request of a client is a bad
one (an id past the vocabulary, a wrong shape, a wrong datatype, in turn): it must come back 400 (gRPC:
INVALID_ARGUMENT) with one line. Every valid answer is compared bit for bit with what `predict` returns
for it in this process. The server's RSS is sampled every 0.5 s: growth is the last sample over the first one after the
warm-up. The server runs with the settings the bench recorded for the artifact's concurrent figure
(its instances and threads) and a queue with a place for every client, unless `--max-queue` makes it
smaller: then the server refuses some requests for a full queue (503, gRPC UNAVAILABLE), and each
client tries the same request again after the server's Retry-After (1 s) until it is taken, counting the
refusals (a valid request is lost only if it fails otherwise; its latency counts from its first try).
`--python` picks the server's interpreter: the lean serving environment (serving/requirements.txt)
when one is given, else this one. The load generator shares the machine with the server (2 cores
here): its own CPU time is recorded beside the figures.

Writes reports/benchmarks/serving_load.json (`--protocol grpc`: serving_load_grpc.json). `--smoke`: a tiny
ONNX deploy folder, 2 clients, 2 s.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.smoke import smoke_deploy, written_to
from pipeline.core.data import Arrays, generate_inputs
from pipeline.core.records import manifest as manifest_record
from pipeline.machine.naming import current
from pipeline.measure.harness import measure_concurrent
from pipeline.serve import server, service
from pipeline.serve.admission import RETRY_AFTER_S
from pipeline.serve.predict import Predictor, load

DEFAULT_OUT = Path("reports/benchmarks/serving_load.json")


@dataclass
class Tally:
    """What the clients saw: latencies of valid requests, and every answer that was not as expected."""

    valid_ms: list[float] = field(default_factory=list)
    bad_refused: int = 0  # answered 400 (gRPC: INVALID_ARGUMENT) with one line
    failed_valid: list[str] = field(default_factory=list)
    bad_otherwise: list[str] = field(default_factory=list)
    full_refusals: int = 0  # refused for a full queue, then tried again (none is lost)
    unsent_at_stop: int = 0  # still refused for a full queue when the run stopped
    lock: threading.Lock = field(default_factory=threading.Lock)


def payloads(predictor: Predictor, count: int) -> tuple[list[Arrays], list[Arrays], list[tuple[str, Arrays]]]:
    """`count` valid batch-1 requests at the dims the artifact was measured at, what predict answers to
    each, and the bad requests (kind, arrays)."""
    manifest = predictor.manifest
    vocab = max(manifest.token_bounds.values(), default=None)
    rows = generate_inputs(manifest.inputs, count, 0, manifest.dims, vocab_size=vocab)
    valid = [{name: value[i : i + 1] for name, value in rows.items()} for i in range(count)]
    expected = [predictor(inputs) for inputs in valid]
    first = valid[0]
    name = next(iter(first))
    bad = [("wrong shape", {**first, name: first[name][..., :1] if first[name].ndim > 1 else first[name][None]})]
    wrong = np.int32 if first[name].dtype != np.int32 else np.int64
    bad.append(("wrong datatype", {**first, name: first[name].astype(wrong)}))
    ids = [n for n, spec in manifest.inputs.items() if spec.kind == "token_ids" and n in manifest.token_bounds]
    if ids:
        past = {**first, ids[0]: first[ids[0]].copy()}
        past[ids[0]][0, 0] = manifest.token_bounds[ids[0]]
        bad.append(("id past the vocabulary", past))
    return valid, expected, bad


@dataclass(frozen=True)
class Protocol:
    """What the clients speak: their tritonclient module, its client's options, the status a bad request
    gets, and the file a run writes by default."""

    module: str
    options: dict[str, float]
    refused: str
    full: str  # the status of a refusal because the server's queue is full: the client retries
    how: str
    out: Path


PROTOCOLS = {
    "rest": Protocol("tritonclient.http", {"connection_timeout": 30, "network_timeout": 30}, "400", "503",
                     "tritonclient.http, binary tensors, keep-alive", DEFAULT_OUT),
    "grpc": Protocol("tritonclient.grpc", {}, "StatusCode.INVALID_ARGUMENT", "StatusCode.UNAVAILABLE",
                     "tritonclient.grpc, raw tensor contents",
                     DEFAULT_OUT.with_name("serving_load_grpc.json")),
}  # fmt: skip


def request(client: Any, module: Any, model: str, inputs: Arrays, outputs: list[str]) -> dict[str, np.ndarray]:
    tensors = []
    for name, value in inputs.items():
        tensor = module.InferInput(name, list(value.shape), module.np_to_triton_dtype(value.dtype))
        tensors.append(tensor.set_data_from_numpy(value))  # http: binary by default; grpc: always raw
    result = client.infer(model, tensors)
    return {name: result.as_numpy(name) for name in outputs}


class RunEnded(Exception):
    """The run stopped while the server was still refusing a request for a full queue."""


def taken(call: Any, protocol: Protocol, tally: Tally, stop: threading.Event) -> Any:
    """call() until the server takes it: a refusal for a full queue (503, gRPC UNAVAILABLE) is counted and
    tried again after the Retry-After the server sends, as a well-behaved client does (gRPC's UNAVAILABLE
    carries none: the same wait); RunEnded when the run stops first."""
    from tritonclient.utils import InferenceServerException

    while not stop.is_set():
        try:
            return call()
        except InferenceServerException as error:
            if error.status() != protocol.full:
                raise
            with tally.lock:
                tally.full_refusals += 1
            stop.wait(RETRY_AFTER_S)
    raise RunEnded


def client_loop(
    protocol: Protocol,
    url: str,
    model: str,
    work: tuple,
    tally: Tally,
    stop: threading.Event,
    index: int,
    bad_every: int,
):
    from tritonclient.utils import InferenceServerException

    valid, expected, bad = work
    module = importlib.import_module(protocol.module)
    client, outputs = module.InferenceServerClient(url, **protocol.options), list(expected[0])
    sent = 0
    while not stop.is_set():
        sent += 1
        bad_one = bool(bad_every) and sent % bad_every == 0
        kind, inputs = bad[(sent // bad_every + index) % len(bad)] if bad_one else ("", None)
        pick = (sent + index * 7) % len(valid)
        start = time.perf_counter()
        try:
            call = partial(request, client, module, model, inputs if bad_one else valid[pick], outputs)
            got = taken(call, protocol, tally, stop)
            if bad_one:
                problem = f"{kind}: answered"
            else:
                problem = next(
                    (
                        f"{n}: differs from predict"
                        for n, v in expected[pick].items()
                        if got[n].tobytes() != v.tobytes()
                    ),
                    "",
                )
        except RunEnded:
            with tally.lock:
                tally.unsent_at_stop += 1
            break
        except InferenceServerException as error:
            refused = bad_one and error.status() == protocol.refused and "\n" not in (error.message() or "")
            problem = "" if refused else f"{kind or 'valid'}: {error.status()} {error.message()}"
        except Exception as error:  # any failure of a valid request is counted, never raised
            problem = f"{type(error).__name__}: {error}"
        elapsed = (time.perf_counter() - start) * 1000  # from the first try: a retried request's wait counts
        with tally.lock:
            if bad_one:
                if problem:
                    tally.bad_otherwise.append(problem)
                else:
                    tally.bad_refused += 1
            elif problem:
                tally.failed_valid.append(problem)
            else:
                tally.valid_ms.append(elapsed)
    client.close()


def in_process_concurrent(predictor: Predictor, valid: Arrays, seconds: float) -> dict[str, Any]:
    """The bench stage's concurrent figure for this artifact, measured now: its recorded requests and
    threads (the server's too), `seconds` of batch-1 calls kept in flight."""
    requests, threads = service.measured_instances(predictor.manifest)
    queue = predictor.session.async_queue(predictor.check(valid), requests, threads)
    sps = measure_concurrent(queue, 1, seconds)
    return {"sps": sps, **queue.details()}


def run_load(args: argparse.Namespace, folder: Path, model: str, work: tuple) -> dict[str, Any]:
    """Start the server, warm it, load it for `args.seconds`, stop it: the figures the clients and the
    RSS sampler saw."""
    queue = args.clients if args.max_queue is None else args.max_queue  # by default no client is refused
    running = server.start(folder, args.python, options=["--max-queue", str(queue)])
    protocol = PROTOCOLS[args.protocol]
    url = running.grpc_url if args.protocol == "grpc" else running.url
    try:
        process = psutil.Process(running.process.pid)

        def load_for(seconds: float, tally: Tally, rss: list[float]) -> tuple[float, float]:
            stop = threading.Event()
            threads = [
                threading.Thread(target=client_loop, args=(protocol, url, model, work, tally, stop, i, args.bad_every))
                for i in range(args.clients)
            ]
            cpu0, start = time.process_time(), time.perf_counter()
            for thread in threads:
                thread.start()
            while time.perf_counter() - start < seconds:
                rss.append(process.memory_info().rss / 2**20)
                time.sleep(0.5)
            stop.set()
            for thread in threads:
                thread.join()
            return time.perf_counter() - start, time.process_time() - cpu0

        load_for(args.warmup, Tally(), [])
        tally, rss = Tally(), []
        wall, client_cpu = load_for(args.seconds, tally, rss)
        server_cpu = sum(process.cpu_times()[:2])
        banner = running.banner()
    finally:
        running.stop()
    latencies = np.array(tally.valid_ms)
    return {
        "server": banner,
        "seconds": round(wall, 2),
        "valid_requests": len(latencies),
        "requests_per_s": len(latencies) / wall,
        "latency_ms": {
            "p50": float(np.percentile(latencies, 50)),
            "p99": float(np.percentile(latencies, 99)),
            "max": float(latencies.max()),
        }
        if len(latencies)
        else None,
        "max_queue": queue,
        "full_refusals_retried": tally.full_refusals,
        "unsent_at_stop": tally.unsent_at_stop,
        "failed_valid": len(tally.failed_valid),
        "failed_valid_examples": sorted(set(tally.failed_valid))[:5],
        "bad_requests": tally.bad_refused + len(tally.bad_otherwise),
        "bad_refused": tally.bad_refused,
        "bad_refused_with": PROTOCOLS[args.protocol].refused,
        "bad_otherwise_examples": sorted(set(tally.bad_otherwise))[:5],
        "rss_mb": {"first": rss[0], "last": rss[-1], "max": max(rss), "samples": len(rss)},
        "rss_growth_pct": 100 * (rss[-1] / rss[0] - 1),
        "load_generator_cpu_s": round(client_cpu, 2),
        "server_cpu_s_total": round(server_cpu, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("deploy", nargs="?", type=Path, default=Path("deploy/minilm_l6"))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--warmup", type=float, default=5, help="seconds of load before the measured run")
    parser.add_argument("--bad-every", type=int, default=10, help="every Nth request of a client is a bad one")
    parser.add_argument("--in-process-seconds", type=float, default=15)
    parser.add_argument("--python", default=sys.executable, help="the server's interpreter (the lean serving env)")
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="rest", help="what the clients speak")
    parser.add_argument(
        "--max-queue", type=int, help="the server's queue beyond its instances (default: one place per client)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    folder = args.deploy
    if args.smoke:
        folder = smoke_deploy(Path("smoke-deploy"))
        args.clients, args.seconds, args.warmup, args.in_process_seconds, args.bad_every = 2, 2, 0.5, 0.5, 3
    # one predictor with the threads the server and the bench's concurrent figure use
    predictor = load(folder, service.measured_instances(manifest_record.load(folder))[1])
    manifest = predictor.manifest
    work = payloads(predictor, 16)
    before = in_process_concurrent(predictor, work[0][0], args.in_process_seconds)
    served = run_load(args, folder, manifest.model, work)
    after = in_process_concurrent(predictor, work[0][0], args.in_process_seconds)
    recorded = manifest.metrics.throughput_concurrent if manifest.metrics else None
    in_process = (before["sps"] + after["sps"]) / 2
    result = {
        "machine": current().name,
        "model": manifest.model,
        "variant": manifest.variant,
        "runtime": f"{manifest.runtime} {manifest.runtime_version}",
        "protocol": args.protocol,
        "how": (
            f"{args.clients} client threads ({PROTOCOLS[args.protocol].how}) in one process beside "
            f"the server on loopback, batch-1 requests back to back for {args.seconds:g} s after a {args.warmup:g} s "
            f"warm-up; every {args.bad_every}th request of a client a bad one; valid answers compared bit for bit "
            f"with predict; server RSS sampled every 0.5 s. In-process figure: the bench stage's concurrent "
            f"queue on this artifact ({args.in_process_seconds:g} s before and after the load), this run."
        ),
        "server_python": args.python,
        "clients": args.clients,
        "served": served,
        "in_process_concurrent": {"before": before, "after": after, "mean_sps": in_process},
        "recorded_concurrent_sps": recorded.sps if recorded else None,
        "recorded_on": manifest.machine,
        "ratio_to_in_process": served["requests_per_s"] / in_process,
        "ratio_to_recorded": served["requests_per_s"] / recorded.sps if recorded else None,
    }
    out = written_to(args.out, PROTOCOLS[args.protocol].out, args.smoke)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    lat = served["latency_ms"] or {"p50": float("nan"), "p99": float("nan")}
    print(
        f"{result['model']} ({result['variant']}): {served['requests_per_s']:.1f} valid requests/s at "
        f"{args.clients} clients, p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms; "
        f"{served['failed_valid']} failed valid, {served['full_refusals_retried']} refused for a full queue and "
        f"retried, {served['bad_refused']}/{served['bad_requests']} bad refused with "
        f"{served['bad_refused_with']}; RSS {served['rss_growth_pct']:+.1f}%; "
        f"x{result['ratio_to_in_process']:.2f} of the in-process concurrent {in_process:.1f}/s "
        f"(recorded {result['recorded_concurrent_sps']}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
