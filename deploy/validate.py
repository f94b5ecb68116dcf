"""Validates Kubernetes manifests offline, without a cluster.

Kubernetes' own kinds are checked against the Kubernetes JSON schemas of one release
(kubernetes-validate, strict: unknown fields are errors). KServe's kinds, which those
schemas lack, are built field by field as KServe's published API types (the models of
the `kserve` package, whose Kubernetes parts are the `kubernetes` client's models):
unknown fields, wrong types and missing required fields are errors.

    python deploy/validate.py [--kubernetes 1.33.0] FILE.yaml ...

Prints one line per resource and exits 1 if any is invalid.
"""

import argparse
import importlib
import importlib.util
import re
import sys
import types

import kubernetes.client.models as k8s_models
import kubernetes_validate
import yaml

# The kserve package's __init__ starts a model server (FastAPI, uvicorn, ...); only its
# generated API types are wanted, so the package is registered without running it.
_spec = importlib.util.find_spec("kserve")
_package = types.ModuleType("kserve")
_package.__path__ = list(_spec.submodule_search_locations)
sys.modules.setdefault("kserve", _package)
kserve_models = importlib.import_module("kserve.models")

KSERVE_KINDS = {
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "V1alpha1ClusterServingRuntime",
    ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
}

SCALARS = {"str": str, "int": int, "float": (int, float), "bool": bool}


def model_class(name):
    for module in (kserve_models, k8s_models):
        if hasattr(module, name):
            return getattr(module, name)
    raise KeyError(f"no API type {name}")


def build(value, type_name, path):
    """`value` as the API type `type_name`, or ValueError saying where it is wrong."""
    if type_name == "object":
        return value
    if type_name in SCALARS:
        ok = isinstance(value, SCALARS[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        if not ok:
            raise ValueError(f"{path}: expected {type_name}, found {type(value).__name__} {value!r}")
        return value
    if m := re.fullmatch(r"[lL]ist\[(.+)\]", type_name):
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list")
        return [build(v, m.group(1), f"{path}[{i}]") for i, v in enumerate(value)]
    if m := re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected a mapping")
        inner = m.group(1) or m.group(2)
        return {k: build(v, inner, f"{path}.{k}") for k, v in value.items()}
    cls = model_class(type_name)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a mapping ({type_name})")
    by_json = {json: attr for attr, json in cls.attribute_map.items()}
    fields = {}
    for key, item in value.items():
        if key not in by_json:
            raise ValueError(f"{path}: {type_name} has no field `{key}`")
        attr = by_json[key]
        fields[attr] = build(item, cls.openapi_types[attr], f"{path}.{key}")
    try:
        # The generated constructors refuse a required field left out.
        return cls(**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {type_name}: {e}") from None


def validate(resource, kubernetes_version):
    key = (resource.get("apiVersion"), resource.get("kind"))
    if key in KSERVE_KINDS:
        build(resource, KSERVE_KINDS[key], resource.get("kind"))
        return "KServe API types"
    kubernetes_validate.validate(resource, kubernetes_version, strict=True)
    return f"Kubernetes {kubernetes_version} schema, strict"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes", default="1.33.0", help="the Kubernetes release whose schemas apply")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    failed = 0
    for file in args.files:
        try:
            with open(file) as f:
                resources = [r for r in yaml.safe_load_all(f) if r]
        except (OSError, yaml.YAMLError) as e:
            print(f"{file}: INVALID: not readable YAML: {e}")
            failed += 1
            continue
        if not resources:
            print(f"{file}: no resources")
            failed += 1
        for resource in resources:
            what = f"{file}: {resource.get('kind')} {resource.get('metadata', {}).get('name')}"
            try:
                print(f"{what}: valid ({validate(resource, args.kubernetes)})")
            except (ValueError, kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as e:
                message = getattr(e, "message", str(e))
                print(f"{what}: INVALID: {message}")
                failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
