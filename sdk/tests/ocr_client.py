#!/usr/bin/env python3
"""Reads a page through a modelless server's `read-text` pipeline with tritonclient,
over gRPC and HTTP, as the sdk's integration test `ocr` starts it: a BYTES tensor of
one encoded page in; the lines' text (BYTES), boxes (FP32 [N, 4, 2]) and scores
(FP32 [N]) out, with each stage's items and time in the answer's parameters.

Usage: ocr_client.py PLAN.json REPORT.json

PLAN names the endpoints, the pipeline, the page file and a file that is not an
image. REPORT gets, per protocol: the metadata's inputs and outputs (name, datatype,
shape), the answer (texts, the shapes of boxes and scores, the parameters), the bad
file's error message, and the repository index (name, version, state); and the
/metrics text.
"""
import json
import sys
import urllib.request

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

plan = json.load(open(sys.argv[1]))
page = open(plan["page_file"], "rb").read()
bad = open(plan["bad_file"], "rb").read()
OUTPUTS = ["text", "boxes", "scores"]


def ask(client_module, client, data):
    tensor = client_module.InferInput("image", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([data], dtype=np.object_))
    wanted = [client_module.InferRequestedOutput(name) for name in OUTPUTS]
    return client.infer(plan["pipeline"], [tensor], outputs=wanted)


def parameters(protocol, result):
    if protocol == "http":
        return result.get_response()["parameters"]
    raw = result.get_response(as_json=True)["parameters"]
    # Protobuf's JSON writes 64-bit integers as strings.
    numbers = ("int64_param", "uint64_param")
    return {key: int(v) if kind in numbers else v
            for key, value in raw.items() for kind, v in value.items()}


def index(protocol, client):
    entries = client.get_model_repository_index()
    if protocol == "grpc":
        return [{"name": e.name, "version": e.version, "state": e.state} for e in entries.models]
    return [{"name": e["name"], "version": e.get("version", ""), "state": e.get("state", "")} for e in entries]


def described(protocol, specs):
    if protocol == "grpc":
        return [{"name": s.name, "datatype": s.datatype, "shape": list(s.shape)} for s in specs]
    return [{"name": s["name"], "datatype": s["datatype"], "shape": s["shape"]} for s in specs]


report = {}
for protocol, client_module, address in (("grpc", grpcclient, plan["grpc"]), ("http", httpclient, plan["http"])):
    client = client_module.InferenceServerClient(address)
    metadata = client.get_model_metadata(plan["pipeline"])
    inputs = metadata.inputs if protocol == "grpc" else metadata["inputs"]
    outputs = metadata.outputs if protocol == "grpc" else metadata["outputs"]
    result = ask(client_module, client, page)
    texts = [t.decode() for t in result.as_numpy("text").reshape(-1)]
    try:
        ask(client_module, client, bad)
        refusal = None
    except InferenceServerException as e:
        refusal = e.message()
    report[protocol] = {
        "ready": client.is_model_ready(plan["pipeline"]),
        "inputs": described(protocol, inputs),
        "outputs": described(protocol, outputs),
        "texts": texts,
        "boxes": list(result.as_numpy("boxes").shape),
        "scores": list(result.as_numpy("scores").shape),
        "parameters": {k: (v if isinstance(v, (str, int, float)) else str(v))
                       for k, v in parameters(protocol, result).items()},
        "refusal": refusal,
        "index": index(protocol, client),
    }
report["metrics"] = urllib.request.urlopen(f"http://{plan['http']}/metrics", timeout=10).read().decode()
json.dump(report, open(sys.argv[2], "w"), indent=1)
