#!/usr/bin/env python3
"""Checks a modelless server with the real KServe V2 clients (tritonclient, gRPC and
HTTP), as the sdk's integration test `kserve` starts it.

Usage: kserve_client.py PLAN.json REPORT.json

PLAN (written by the Rust test) names the endpoints, the models to use, and cases
whose expected outputs the test computed in process. Every check runs over both
protocols unless it says otherwise. Failures are collected; the script exits 1 with
them listed, else 0; REPORT lists the checks that passed.
"""
import json
import re
import sys
import threading
import time
import urllib.request

import gevent
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.service_pb2 as pb
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

NUMPY = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32,
         "UINT8": np.uint8, "BOOL": np.bool_}

plan = json.load(open(sys.argv[1]))
passed, failed = [], []


def check(name, fn):
    try:
        fn()
        passed.append(name)
    except Exception as e:  # a failed check is reported, the others still run
        failed.append(f"{name}: {type(e).__name__}: {e}")


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def array(t):
    return np.array(t["data"], dtype=NUMPY[t["datatype"]]).reshape(t["shape"])


def same(actual, t, what):
    wanted = array(t)
    expect(actual is not None and actual.shape == wanted.shape and actual.dtype == wanted.dtype,
           f"{what}: got {None if actual is None else (actual.shape, actual.dtype)}, "
           f"expected {(wanted.shape, wanted.dtype)}")
    if wanted.dtype.kind == "f":
        expect(np.allclose(actual, wanted, rtol=1e-5, atol=1e-6), f"{what}: values differ")
    else:
        expect(np.array_equal(actual, wanted), f"{what}: values differ")


grpc = grpcclient.InferenceServerClient(plan["grpc"])
# The HTTP client runs on gevent: requests in parallel go through its own pool
# (`async_infer`), never through threads.
http = httpclient.InferenceServerClient(plan["http"], connection_timeout=30, network_timeout=60, concurrency=4)
CLIENTS = {"grpc": (grpc, grpcclient), "http": (http, httpclient)}


def in_background(protocol, model, inputs):
    """Sends a request without waiting; returns a function that waits for it."""
    client, _ = CLIENTS[protocol]
    if protocol == "http":
        request = client.async_infer(model, inputs)
        return request.get_result
    done = threading.Event()
    client.async_infer(model, inputs, callback=lambda result, error: done.set())
    return lambda: done.wait(30)


def pending(model):
    """Requests waiting in `model`'s queue, as `/metrics` says."""
    text = urllib.request.urlopen(f"http://{plan['http']}/metrics", timeout=10).read().decode()
    line = re.search(r'modelless_inference_pending_request_count\{task="%s",variant="%s"\} (\S+)' % (model, model), text)
    return float(line.group(1)) if line else 0.0


def wait_until(condition, what, limit_s=10):
    deadline = time.time() + limit_s
    while not condition():
        expect(time.time() < deadline, f"timed out waiting for {what}")
        # The HTTP client's requests are greenlets: they are sent only while this yields.
        gevent.sleep(0.005)


def inputs_of(module, tensors, binary=True):
    made = []
    for t in tensors:
        i = module.InferInput(t["name"], t["shape"], t["datatype"])
        if module is httpclient:
            i.set_data_from_numpy(array(t), binary_data=binary)
        else:
            i.set_data_from_numpy(array(t))
        made.append(i)
    return made


def status_of(error):
    """gRPC: the code's name (NOT_FOUND); HTTP: the status (404)."""
    return str(error.status()).replace("StatusCode.", "")


def fails_with(call, protocol, codes):
    try:
        call()
    except InferenceServerException as e:
        wanted = codes[protocol]
        wanted = wanted if isinstance(wanted, (list, tuple)) else [wanted]
        expect(status_of(e) in [str(w) for w in wanted], f"status {status_of(e)} ({e.message()}), "
                                                         f"expected {wanted}")
        return e
    raise AssertionError(f"no error, expected {codes[protocol]}")


# ---------------------------------------------------------------- health, metadata
for protocol, (client, module) in CLIENTS.items():
    def health(client=client):
        expect(client.is_server_live() and client.is_server_ready(), "server not live and ready")
        meta = client.get_server_metadata()
        meta = meta if isinstance(meta, dict) else {"name": meta.name, "extensions": list(meta.extensions)}
        expect(meta["name"] == "modelless" and "model_repository" in meta["extensions"], f"metadata {meta}")
    check(f"{protocol}: health and server metadata", health)

    def readiness(client=client):
        expect(client.is_model_ready(plan["task"]), "task not ready")
        expect(client.is_model_ready(plan["variant_ready"]), "loaded variant not ready")
        expect(not client.is_model_ready(plan["variant_unloaded"]), "unloaded variant ready")
        expect(not client.is_model_ready("no-such-model"), "unknown model ready")
    check(f"{protocol}: model readiness", readiness)

    for case in plan["cases"]:
        def metadata(client=client, case=case):
            meta = client.get_model_metadata(case["model"])
            if not isinstance(meta, dict):
                meta = {"inputs": [{"name": i.name, "datatype": i.datatype, "shape": list(i.shape)}
                                   for i in meta.inputs]}
            got = {i["name"]: (i["datatype"], i["shape"][0]) for i in meta["inputs"]}
            want = {t["name"]: (t["datatype"], -1) for t in case["inputs"]}
            expect(got == want, f"inputs {got}, expected {want}")
        check(f"{protocol}: metadata of {case['model']}", metadata)

# ---------------------------------------------------------------- inference
def infer_case(protocol, case, binary=True, parameters=None):
    client, module = CLIENTS[protocol]
    result = client.infer(case["model"], inputs_of(module, case["inputs"], binary), parameters=parameters)
    for t in case["outputs"]:
        same(result.as_numpy(t["name"]), t, f"{case['model']} output {t['name']}")
    return result.get_response()


def served_by(response):
    if isinstance(response, dict):
        return response["model_name"], response["parameters"]["variant"]
    return response.model_name, response.parameters["variant"].string_param


for case in plan["cases"]:
    def via_grpc_raw(case=case):
        name, variant = served_by(infer_case("grpc", case))
        expect(name == case["served_by"] and variant == case["served_by"], f"served by {name}/{variant}")
    check(f"grpc: infer {case['model']} (raw contents) equals in-process", via_grpc_raw)

    def via_http(case=case):
        for binary in (True, False):
            name, variant = served_by(infer_case("http", case, binary))
            expect(name == case["served_by"] and variant == case["served_by"], f"served by {name}/{variant}")
    check(f"http: infer {case['model']} (binary and JSON data) equals in-process", via_http)

    def via_grpc_typed(case=case):
        request = pb.ModelInferRequest(model_name=case["model"])
        for t in case["inputs"]:
            tensor = request.inputs.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
            flat = array(t).flatten().tolist()
            field = {"FP32": "fp32_contents", "INT64": "int64_contents", "INT32": "int_contents",
                     "UINT8": "uint_contents", "BOOL": "bool_contents"}.get(t["datatype"])
            if field is None:  # FP16 has no typed field: raw only, as the protocol says
                return
            getattr(tensor.contents, field).extend(flat)
        response = grpc._client_stub.ModelInfer(request)
        names = [o.name for o in response.outputs]
        for t in case["outputs"]:
            k = names.index(t["name"])
            out = np.frombuffer(response.raw_output_contents[k], dtype=NUMPY[t["datatype"]])
            same(out.reshape(list(response.outputs[k].shape)), t, f"typed {case['model']} {t['name']}")
    check(f"grpc: infer {case['model']} (typed contents) equals in-process", via_grpc_typed)


def model_less(protocol):
    client, module = CLIENTS[protocol]
    image = next(c for c in plan["cases"] if c["model"] == plan["task"])
    params = {"latency_ms": 5000, "min_accuracy": plan["min_accuracy_for_other"]}
    result = client.infer(plan["task"], inputs_of(module, image["inputs"]), parameters=params)
    _, variant = served_by(result.get_response())
    expect(variant == plan["variant_for_accuracy"], f"min_accuracy served by {variant}")
    fails_with(lambda: client.infer(plan["task"], inputs_of(module, image["inputs"]),
                                    parameters={"min_accuracy": 99.9}),
               protocol, {"grpc": "FAILED_PRECONDITION", "http": 412})


for protocol in CLIENTS:
    check(f"{protocol}: task parameters are the SLO (min_accuracy picks the variant)",
          lambda protocol=protocol: model_less(protocol))

# ---------------------------------------------------------------- errors
CODES = {
    "unknown model": {"grpc": "NOT_FOUND", "http": 404},
    "bad shape": {"grpc": "INVALID_ARGUMENT", "http": 400},
    "not ready": {"grpc": "UNAVAILABLE", "http": 503},
    "queue full": {"grpc": "RESOURCE_EXHAUSTED", "http": 429},
    "deadline": {"grpc": "DEADLINE_EXCEEDED", "http": 504},
    # tonic answers an oversized message OUT_OF_RANGE; HTTP 413.
    "too large": {"grpc": ["RESOURCE_EXHAUSTED", "OUT_OF_RANGE"], "http": 413},
}
tiny = next(c for c in plan["cases"] if c["model"] == plan["tiny"])


def tensor(name, datatype, shape, fill=0.5):
    return {"name": name, "datatype": datatype, "shape": shape,
            "data": np.full(shape, fill).astype(NUMPY[datatype]).tolist()}


for protocol, (client, module) in CLIENTS.items():
    def errors(client=client, module=module, protocol=protocol):
        x = tiny["inputs"][0]
        run = lambda model, tensors, **kw: client.infer(model, inputs_of(module, tensors), **kw)
        fails_with(lambda: run("no-such-model", [x]), protocol, CODES["unknown model"])
        fails_with(lambda: run(plan["tiny"], [x], model_version="99"), protocol, CODES["unknown model"])
        fails_with(lambda: run(plan["tiny"], [tensor(x["name"], "FP32", [1, 5])]), protocol, CODES["bad shape"])
        fails_with(lambda: run(plan["tiny"], [tensor(x["name"], "INT32", x["shape"], 1)]), protocol,
                   CODES["bad shape"])
        fails_with(lambda: run(plan["tiny"], [tensor("wrong_name", "FP32", x["shape"])]), protocol,
                   CODES["bad shape"])
        image = next(c for c in plan["cases"] if c["model"] == plan["task"])
        fails_with(lambda: run(plan["variant_unloaded"], image["inputs"]), protocol, CODES["not ready"])
        big = plan["max_message_mib"] * (1 << 20) // 4 + 1024
        fails_with(lambda: run(plan["tiny"], [tensor(x["name"], "FP32", [big // 4, 4])]), protocol,
                   CODES["too large"])
    check(f"{protocol}: unknown model, bad input, not ready, too large", errors)

    def overload(client=client, module=module, protocol=protocol):
        # One request runs (the slow model takes 400 ms), one waits (queue of 1),
        # the third is refused.
        x = [tensor("input", "FP32", [1, 4])]
        # One waits only while the other runs (400 ms): then the queue is full. On a busy
        # machine this client may not look within that window: send the pair again.
        for attempt in range(4):
            waits = [in_background(protocol, plan["slow"], inputs_of(module, x)) for _ in range(2)]
            try:
                wait_until(lambda: pending(plan["slow"]) == 1, "a request waiting behind one running", limit_s=2)
            except AssertionError:
                for wait in waits:
                    wait()
                if attempt == 3:
                    raise
                continue
            fails_with(lambda: client.infer(plan["slow"], inputs_of(module, x)), protocol, CODES["queue full"])
            for wait in waits:
                wait()
            return
    check(f"{protocol}: queue full", overload)

    def deadline(client=client, module=module, protocol=protocol):
        x = [tensor("input", "FP32", [1, 4])]
        # Triton's `timeout` (µs): behind a request that runs 400 ms, one cannot start
        # within 50 ms. On a busy machine the first may not have reached the server
        # yet when the second is sent (and the second then runs): wait longer and retry.
        for attempt in range(4):
            busy = in_background(protocol, plan["slow"], inputs_of(module, x))
            time.sleep(0.1 * 2 ** attempt)
            try:
                client.infer(plan["slow"], inputs_of(module, x), timeout=50_000)
            except InferenceServerException as e:
                wanted = [str(c) for c in [CODES["deadline"][protocol]]]
                expect(status_of(e) in wanted, f"status {status_of(e)} ({e.message()}), expected {wanted}")
                busy()
                return
            busy()
        raise AssertionError(f"no error, expected {CODES['deadline'][protocol]}")
    check(f"{protocol}: deadline exceeded", deadline)

# ---------------------------------------------------------------- repository
for protocol, (client, module) in CLIENTS.items():
    def repository(client=client, protocol=protocol):
        name = plan["repository_model"]
        index = client.get_model_repository_index()
        index = index if isinstance(index, list) else [{"name": m.name, "state": m.state} for m in index.models]
        states = {m["name"]: m.get("state") for m in index}
        expect(states.get(name) == "UNAVAILABLE" and states.get(plan["task"]) == "READY", f"index {states}")
        expect(not client.is_model_ready(name), "not yet loaded, yet ready")
        # Load and unload need the admin bearer token: none, or a wrong one, is refused.
        admin = {"authorization": "Bearer " + plan["admin_token"]}
        unauthenticated = {"grpc": "UNAUTHENTICATED", "http": 401}
        fails_with(lambda: client.load_model(name), protocol, unauthenticated)
        fails_with(lambda: client.load_model(name, headers={"authorization": "Bearer wrong"}), protocol,
                   unauthenticated)
        expect(not client.is_model_ready(name), "an unauthenticated load made it ready")
        client.load_model(name, headers=admin)
        expect(client.is_model_ready(name), "loaded, not ready")
        result = client.infer(name, inputs_of(CLIENTS[protocol][1], tiny["inputs"]))
        same(result.as_numpy(tiny["outputs"][0]["name"]), tiny["outputs"][0], "repository model output")
        fails_with(lambda: client.unload_model(name), protocol, unauthenticated)
        client.unload_model(name, headers=admin)
        expect(not client.is_model_ready(name), "unloaded, still ready")
        denied = {"grpc": "PERMISSION_DENIED", "http": 403}
        fails_with(lambda: client.load_model("../" + plan["outside_name"], headers=admin), protocol, denied)
        fails_with(lambda: client.load_model(name, config=json.dumps({"path": plan["outside_path"]}), headers=admin),
                   protocol, denied)
        fails_with(lambda: client.load_model(name, config=json.dumps({"path": "../" + plan["outside_name"]}),
                                             headers=admin), protocol, denied)
        fails_with(lambda: client.load_model("no-such-model", headers=admin), protocol,
                   {"grpc": "NOT_FOUND", "http": 404})
        expect(not client.is_model_ready(name), "a refused load made it ready")
    check(f"{protocol}: repository index, load and unload with the admin token only; paths outside the root "
          "refused", repository)

# ---------------------------------------------------------------- metrics
def scrape():
    text = urllib.request.urlopen(f"http://{plan['http']}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            values[(m.group(1), labels.get("task"), labels.get("variant"), labels.get("reason"))] = float(m.group(3))
    return values


def metrics():
    model = plan["tiny"]
    key = lambda name, reason=None: (name, model, model, reason)
    before = scrape()
    two_rows = [tensor(tiny["inputs"][0]["name"], "FP32", [2, 4])]
    for _ in range(5):
        http.infer(model, inputs_of(httpclient, two_rows))
    fails_with(lambda: http.infer(model, inputs_of(httpclient, [tensor("input", "FP32", [1, 5])])), "http",
               {"http": 400})
    after = scrape()
    delta = lambda k: after.get(k, 0) - before.get(k, 0)
    moved = {
        "success": delta(key("modelless_inference_request_success")),
        "inferences": delta(key("modelless_inference_count")),
        "executions": delta(key("modelless_inference_exec_count")),
        "invalid_input": delta(key("modelless_inference_request_failure", "invalid_input")),
        "latency observations": delta(key("modelless_inference_request_latency_seconds_count")),
    }
    wanted = {"success": 5, "inferences": 10, "executions": 5, "invalid_input": 1, "latency observations": 5}
    expect(moved == wanted, f"counters moved {moved}, expected {wanted}")
    expect(delta(key("modelless_inference_request_duration_us")) > 0, "request duration did not grow")
    expect(delta(key("modelless_inference_compute_infer_duration_us")) > 0, "compute duration did not grow")
    # Five batches ran once each: their run time is at most the five requests' compute time.
    run = delta(key("modelless_inference_batch_run_duration_us"))
    compute = delta(key("modelless_inference_compute_infer_duration_us"))
    expect(0 < run <= compute, f"batch run time {run} µs against compute {compute} µs")
    expect(("modelless_cpu_utilization", None, None, None) in after, "no CPU utilisation")
    stats = grpc.get_inference_statistics(model).model_stats[0]
    expect(stats.inference_count == after[key("modelless_inference_count")], "statistics disagree with metrics")


check("http: /metrics counters move by the right amounts after traffic", metrics)

json.dump({"passed": passed, "failed": failed}, open(sys.argv[2], "w"), indent=1)
for name in passed:
    print(f"ok: {name}")
for failure in failed:
    print(f"FAILED: {failure}")
sys.exit(1 if failed else 0)
