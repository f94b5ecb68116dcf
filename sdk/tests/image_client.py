#!/usr/bin/env python3
"""Sends JPEG bytes to a modelless server with tritonclient, over gRPC and HTTP, as the
sdk's integration test `images` starts it: a BYTES tensor of one encoded image, with a
`classification` output; then files that are not images a server can serve, while
other threads keep sending the good image.

Usage: image_client.py PLAN.json REPORT.json

PLAN names the endpoints, the models to ask (a task and its variants), the image
input, the image file, the output, the class count and the bad files. REPORT gets,
per protocol: the input's datatype in the model's metadata, each model's answer
(classes and the variant that served), each bad file's error status, and how many
good requests the other threads sent and how many failed meanwhile.
"""
import json
import sys
import threading

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

plan = json.load(open(sys.argv[1]))
image = open(plan["image_file"], "rb").read()


def ask(client_module, client, model, data):
    tensor = client_module.InferInput(plan["input"], [1], "BYTES")
    tensor.set_data_from_numpy(np.array([data], dtype=np.object_))
    wanted = client_module.InferRequestedOutput(plan["output"], class_count=plan["classes"])
    return client.infer(model, [tensor], outputs=[wanted])


def variant_of(protocol, result):
    if protocol == "grpc":
        return result.get_response(as_json=True)["parameters"]["variant"]["string_param"]
    return result.get_response()["parameters"]["variant"]


report = {}
for protocol, client_module, address in (("grpc", grpcclient, plan["grpc"]), ("http", httpclient, plan["http"])):
    client = client_module.InferenceServerClient(address)
    metadata = client.get_model_metadata(plan["models"][0])
    inputs = metadata.inputs if protocol == "grpc" else metadata["inputs"]
    first = inputs[0]
    datatype = first.datatype if protocol == "grpc" else first["datatype"]
    answers = {}
    for model in plan["models"]:
        result = ask(client_module, client, model, image)
        strings = [s.decode() for s in result.as_numpy(plan["output"]).reshape(-1)]
        answers[model] = {"classes": strings, "variant": variant_of(protocol, result)}

    # Good requests from other threads while the bad files go in.
    stop = threading.Event()
    counts = {"sent": 0, "failed": 0}
    lock = threading.Lock()

    def keep_sending():
        own = client_module.InferenceServerClient(address)
        while not stop.is_set():
            try:
                ask(client_module, own, plan["models"][0], image)
                failed = 0
            except InferenceServerException:
                failed = 1
            with lock:
                counts["sent"] += 1
                counts["failed"] += failed

    threads = [threading.Thread(target=keep_sending) for _ in range(2)]
    for t in threads:
        t.start()
    refused = {}
    for name, path in plan["bad"].items():
        try:
            ask(client_module, client, plan["models"][0], open(path, "rb").read())
            refused[name] = {"status": "OK", "message": ""}
        except InferenceServerException as e:
            refused[name] = {"status": str(e.status()), "message": e.message()}
    stop.set()
    for t in threads:
        t.join()
    report[protocol] = {"datatype": datatype, "answers": answers, "refused": refused, "good": counts}
json.dump(report, open(sys.argv[2], "w"))
