#!/usr/bin/env python3
"""Asks a modelless server for classification answers with tritonclient, over gRPC and
HTTP, as the sdk's integration test `pretrained` starts it.

Usage: classification_client.py PLAN.json REPORT.json

PLAN names the endpoints, the model, its input (a raw little-endian f32 file and its
shape), the output and the class count. REPORT gets, per protocol, the BYTES strings
of the answer (decoded) and its shape.
"""
import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

plan = json.load(open(sys.argv[1]))
image = np.fromfile(plan["input_file"], dtype="<f4").reshape(plan["input_shape"])
report = {}
for protocol, client_module, address in (("grpc", grpcclient, plan["grpc"]), ("http", httpclient, plan["http"])):
    client = client_module.InferenceServerClient(address)
    tensor = client_module.InferInput(plan["input"], list(image.shape), "FP32")
    tensor.set_data_from_numpy(image)
    wanted = client_module.InferRequestedOutput(plan["output"], class_count=plan["classes"])
    result = client.infer(plan["model"], [tensor], outputs=[wanted])
    answer = result.as_numpy(plan["output"])
    strings = [s.decode() if isinstance(s, bytes) else str(s) for s in answer.reshape(-1)]
    if protocol == "grpc":
        variant = result.get_response(as_json=True)["parameters"]["variant"]["string_param"]
    else:
        variant = result.get_response()["parameters"]["variant"]
    report[protocol] = {"shape": list(answer.shape), "classes": strings, "variant": variant}
json.dump(report, open(sys.argv[2], "w"))
