"""Validates Kubernetes manifests offline, without a cluster.

Kubernetes' own kinds are checked against the Kubernetes JSON schemas of one release
(kubernetes-validate, strict: unknown fields are errors). KServe's kinds, which those
schemas lack, are built field by field as KServe's published API types (the models of
the `kserve` package, whose Kubernetes parts are the `kubernetes` client's models):
unknown fields, wrong types and missing required fields are errors. KEDA's
ScaledObject, which neither knows, is checked against KEDA's documented
specification the same way, its prometheus triggers' metadata included. A ConfigMap
that holds a Prometheus adapter's config (`config.yaml` with `rules`) has that config
checked too, as strictly as the adapter reads it.

    python deploy/validate.py [--kubernetes 1.33.0] FILE.yaml ...

Prints one line per resource and exits 1 if any is invalid.
"""

import argparse
import importlib
import importlib.util
import re
import sys
import types
import urllib.parse

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

# A Kubernetes quantity ("0.7", "700m", "2Gi"), as the API server's CRD schemas match
# one given as a string; a plain number is one too.
QUANTITY = re.compile(
    r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?"
)
# Types the kserve package names but does not define: quantities (Go's
# resource.Quantity), and Kubernetes' own types under their Go package's name
# (K8sIoApiAutoscalingV2HorizontalPodAutoscalerBehavior is the kubernetes client's
# V2HorizontalPodAutoscalerBehavior).
QUANTITY_TYPES = {"V1beta1MetricQuantity", "ResourceQuantity"}
GO_PACKAGE_TYPE = re.compile(r"K8sIoApi[A-Z][a-z]+((V\d+(?:(?:alpha|beta)\d+)?)[A-Z]\w*)")

# Values KServe's CRD allows (its Go API's kubebuilder enums), which the generated
# Python types do not carry: (type, field) -> allowed.
KSERVE_ENUMS = {
    ("V1beta1MetricsSpec", "type"): {"Resource", "External", "PodMetric"},
    ("V1beta1MetricTarget", "type"): {"Utilization", "Value", "AverageValue"},
    ("V1beta1ExternalMetrics", "backend"): {"prometheus", "graphite"},
    ("V1beta1PodMetrics", "backend"): {"opentelemetry"},
    ("V1beta1ResourceMetricSource", "name"): {"cpu", "memory"},
    ("V1beta1PredictorSpec", "scaleMetric"): {"cpu", "memory", "concurrency", "rps"},
    ("V1beta1ComponentExtensionSpec", "scaleMetric"): {"cpu", "memory", "concurrency", "rps"},
}


def model_class(name):
    for module in (kserve_models, k8s_models):
        if hasattr(module, name):
            return getattr(module, name)
    if m := GO_PACKAGE_TYPE.fullmatch(name):
        return model_class(m.group(1))
    raise KeyError(f"no API type {name}")


def check_quantity(value, path):
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, str) and QUANTITY.fullmatch(value)
    )
    if not ok:
        raise ValueError(f"{path}: expected a quantity (\"0.7\", \"500m\", \"2Gi\"), found {value!r}")
    return value


def build(value, type_name, path):
    """`value` as the API type `type_name`, or ValueError saying where it is wrong."""
    if type_name == "object":
        return value
    if type_name in SCALARS:
        ok = isinstance(value, SCALARS[type_name]) and not (type_name != "bool" and isinstance(value, bool))
        if not ok:
            raise ValueError(f"{path}: expected {type_name}, found {type(value).__name__} {value!r}")
        return value
    if type_name in QUANTITY_TYPES:
        return check_quantity(value, path)
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
        allowed = KSERVE_ENUMS.get((type_name, key))
        if allowed is not None and item not in allowed:
            raise ValueError(f"{path}.{key}: {item!r} is not one of {', '.join(sorted(allowed))}")
        attr = by_json[key]
        fields[attr] = build(item, cls.openapi_types[attr], f"{path}.{key}")
    try:
        # The generated constructors refuse a required field left out.
        return cls(**fields)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {type_name}: {e}") from None


# --- KEDA -----------------------------------------------------------------------------
# keda.sh/v1alpha1 ScaledObject, from KEDA's ScaledObject specification
# (keda.sh/docs/2.18/reference/scaledobject-spec/) and its Go types
# (apis/keda/v1alpha1/scaledobject_types.go): per type, field -> (type, required).
# A type named here is checked by this table; any other by `build` (Kubernetes'
# ObjectMeta) or, for the HPA behaviour KEDA hands on, by Kubernetes' HPA schema.
KEDA_TYPES = {
    "ScaledObject": {
        "apiVersion": ("str", True),
        "kind": ("str", True),
        "metadata": ("V1ObjectMeta", True),
        "spec": ("ScaledObjectSpec", True),
        "status": ("object", False),
    },
    "ScaledObjectSpec": {
        "scaleTargetRef": ("ScaleTarget", True),
        "pollingInterval": ("count", False),
        "cooldownPeriod": ("count", False),
        "initialCooldownPeriod": ("count", False),
        "idleReplicaCount": ("count", False),
        "minReplicaCount": ("count", False),
        "maxReplicaCount": ("count", False),
        "fallback": ("Fallback", False),
        "advanced": ("AdvancedConfig", False),
        "triggers": ("list[ScaleTriggers]", True),
    },
    "ScaleTarget": {
        "name": ("str", True),
        "apiVersion": ("str", False),
        "kind": ("str", False),
        "envSourceContainerName": ("str", False),
    },
    "Fallback": {
        "failureThreshold": ("count", True),
        "replicas": ("count", True),
        "behavior": ("FallbackBehavior", False),
    },
    "AdvancedConfig": {
        "horizontalPodAutoscalerConfig": ("HorizontalPodAutoscalerConfig", False),
        "restoreToOriginalReplicaCount": ("bool", False),
        "scalingModifiers": ("ScalingModifiers", False),
    },
    "HorizontalPodAutoscalerConfig": {
        "name": ("str", False),
        "behavior": ("HPABehavior", False),
    },
    "ScalingModifiers": {
        "formula": ("str", True),
        "target": ("str", True),
        "activationTarget": ("str", False),
        "metricType": ("ModifierMetricType", False),
    },
    "ScaleTriggers": {
        "type": ("str", True),
        "name": ("str", False),
        "metadata": ("dict(str, str)", True),
        "authenticationRef": ("AuthenticationRef", False),
        "metricType": ("MetricType", False),
        "useCachedMetrics": ("bool", False),
    },
    "AuthenticationRef": {
        "name": ("str", True),
        "kind": ("AuthenticationKind", False),
    },
}
KEDA_ENUMS = {
    "FallbackBehavior": {"static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"},
    "MetricType": {"AverageValue", "Value", "Utilization"},
    "ModifierMetricType": {"AverageValue", "Value"},
    "AuthenticationKind": {"TriggerAuthentication", "ClusterTriggerAuthentication"},
}
# The prometheus trigger's metadata (keda.sh/docs/2.18/scalers/prometheus/):
# key -> (required, kind of value). Every value is a string, as in any trigger.
PROMETHEUS_METADATA = {
    "serverAddress": (True, "url"),
    "query": (True, "text"),
    "threshold": (True, "number"),
    "activationThreshold": (False, "number"),
    "namespace": (False, "text"),
    "customHeaders": (False, "text"),
    "ignoreNullValues": (False, "bool"),
    "queryParameters": (False, "text"),
    "unsafeSsl": (False, "bool"),
    "timeout": (False, "integer"),
    "authModes": (False, "text"),
}
TRIGGER_METADATA = {"prometheus": PROMETHEUS_METADATA}


def check_keda(value, type_name, path, kubernetes_version):
    """Checks `value` as KEDA's `type_name`, or raises ValueError saying where it is wrong."""
    if type_name == "count":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: expected a whole number ≥ 0, found {value!r}")
        return
    if type_name in KEDA_ENUMS:
        if value not in KEDA_ENUMS[type_name]:
            raise ValueError(f"{path}: {value!r} is not one of {', '.join(sorted(KEDA_ENUMS[type_name]))}")
        return
    if type_name == "HPABehavior":
        check_hpa_behavior(value, path, kubernetes_version)
        return
    if m := re.fullmatch(r"list\[(.+)\]", type_name):
        if not isinstance(value, list) or not value:
            raise ValueError(f"{path}: expected a list of at least one")
        for i, item in enumerate(value):
            check_keda(item, m.group(1), f"{path}[{i}]", kubernetes_version)
        return
    if type_name not in KEDA_TYPES:
        build(value, type_name, path)
        return
    fields = KEDA_TYPES[type_name]
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a mapping ({type_name})")
    for key, item in value.items():
        if key not in fields:
            raise ValueError(f"{path}: {type_name} has no field `{key}`")
        check_keda(item, fields[key][0], f"{path}.{key}", kubernetes_version)
    for key, (_, required) in fields.items():
        if required and key not in value:
            raise ValueError(f"{path}: {type_name} needs `{key}`")
    if type_name == "ScaledObjectSpec":
        check_replica_counts(value, path)
    if type_name == "ScaleTriggers":
        check_trigger_metadata(value, path)


def check_hpa_behavior(behavior, path, kubernetes_version):
    """KEDA hands `behavior` to the HPA it makes: Kubernetes' HPA schema checks it."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "keda-hpa"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 1, "behavior": behavior},
    }
    try:
        kubernetes_validate.validate(hpa, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as e:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in list(e.path)[2:])
        raise ValueError(f"{path}{where}: {e.message}") from None


def check_replica_counts(spec, path):
    low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    if low > high:
        raise ValueError(f"{path}: minReplicaCount {low} is above maxReplicaCount {high}")
    if "idleReplicaCount" in spec and spec["idleReplicaCount"] >= low:
        raise ValueError(f"{path}: idleReplicaCount must be below minReplicaCount ({low})")


def check_trigger_metadata(trigger, path):
    keys = TRIGGER_METADATA.get(trigger["type"])
    if keys is None:
        known = ", ".join(sorted(TRIGGER_METADATA))
        raise ValueError(f"{path}.type: trigger type {trigger['type']!r} is not one this validator knows ({known})")
    metadata, where = trigger["metadata"], f"{path}.metadata"
    for key, text in metadata.items():
        if key not in keys:
            raise ValueError(f"{where}: the {trigger['type']} trigger has no metadata `{key}`")
        kind = keys[key][1]
        if kind == "number" and not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", text):
            raise ValueError(f"{where}.{key}: expected a number, found {text!r}")
        if kind == "integer" and not re.fullmatch(r"\d+", text):
            raise ValueError(f"{where}.{key}: expected a whole number, found {text!r}")
        if kind == "bool" and text not in ("true", "false"):
            raise ValueError(f"{where}.{key}: expected \"true\" or \"false\", found {text!r}")
        if kind == "url":
            url = urllib.parse.urlparse(text)
            if url.scheme not in ("http", "https") or not url.netloc:
                raise ValueError(f"{where}.{key}: expected an http(s) URL, found {text!r}")
        if kind in ("text", "url") and not text.strip():
            raise ValueError(f"{where}.{key}: empty")
    for key, (required, _) in keys.items():
        if required and key not in metadata:
            raise ValueError(f"{where}: the {trigger['type']} trigger needs `{key}`")


# --- The Prometheus adapter's config ------------------------------------------------------
# kubernetes-sigs/prometheus-adapter's config file (pkg/config/config.go), which the
# adapter reads strictly (unknown fields are errors): per type, field -> (type, required).
ADAPTER_TYPES = {
    "Config": {
        "rules": ("list[DiscoveryRule]", False),
        "resourceRules": ("ResourceRules", False),
        "externalRules": ("list[DiscoveryRule]", False),
    },
    "DiscoveryRule": {
        "seriesQuery": ("str", True),
        "seriesFilters": ("list[RegexFilter]", False),
        "resources": ("ResourceMapping", False),
        "name": ("NameMapping", False),
        "metricsQuery": ("str", True),
        "labelValueReplacements": ("list[LabelValueReplacement]", False),
    },
    "RegexFilter": {"is": ("regex", False), "isNot": ("regex", False)},
    "ResourceMapping": {"template": ("str", False), "overrides": ("dict[GroupResource]", False)},
    "GroupResource": {"group": ("str", False), "resource": ("str", True)},
    "NameMapping": {"matches": ("regex", False), "as": ("str", False)},
    "LabelValueReplacement": {"find": ("str", False), "replace": ("str", False)},
    "ResourceRules": {"cpu": ("ResourceRule", True), "memory": ("ResourceRule", True), "window": ("str", True)},
    "ResourceRule": {
        "containerQuery": ("str", True),
        "nodeQuery": ("str", True),
        "resources": ("ResourceMapping", False),
        "containerLabel": ("str", False),
    },
}


def check_adapter(value, type_name, path):
    if type_name == "str":
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected str, found {type(value).__name__} {value!r}")
        return
    if type_name == "regex":
        check_adapter(value, "str", path)
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"{path}: not a regular expression: {e}") from None
        return
    if m := re.fullmatch(r"list\[(.+)\]", type_name):
        if not isinstance(value, list):
            raise ValueError(f"{path}: expected a list")
        for i, item in enumerate(value):
            check_adapter(item, m.group(1), f"{path}[{i}]")
        return
    if m := re.fullmatch(r"dict\[(.+)\]", type_name):
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected a mapping")
        for key, item in value.items():
            check_adapter(item, m.group(1), f"{path}.{key}")
        return
    fields = ADAPTER_TYPES[type_name]
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a mapping ({type_name})")
    for key, item in value.items():
        if key not in fields:
            raise ValueError(f"{path}: {type_name} has no field `{key}`")
        check_adapter(item, fields[key][0], f"{path}.{key}")
    for key, (_, required) in fields.items():
        if required and key not in value:
            raise ValueError(f"{path}: {type_name} needs `{key}`")
    if type_name == "DiscoveryRule" and "<<.Series>>" not in value["metricsQuery"]:
        raise ValueError(f"{path}.metricsQuery: queries no <<.Series>>")
    if type_name == "RegexFilter" and len(value) != 1:
        raise ValueError(f"{path}: a filter sets exactly one of `is` and `isNot`")


def adapter_config(resource):
    """The Prometheus adapter's config a ConfigMap holds, parsed, or None."""
    text = (resource.get("data") or {}).get("config.yaml")
    if not isinstance(text, str):
        return None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if isinstance(config, dict) and {"rules", "externalRules", "resourceRules"} & set(config):
        return config
    return None


def validate(resource, kubernetes_version):
    key = (resource.get("apiVersion"), resource.get("kind"))
    if key in KSERVE_KINDS:
        build(resource, KSERVE_KINDS[key], resource.get("kind"))
        return "KServe API types"
    if key == ("keda.sh/v1alpha1", "ScaledObject"):
        check_keda(resource, "ScaledObject", "ScaledObject", kubernetes_version)
        return "KEDA ScaledObject spec"
    kubernetes_validate.validate(resource, kubernetes_version, strict=True)
    if key == ("v1", "ConfigMap") and (config := adapter_config(resource)) is not None:
        check_adapter(config, "Config", "ConfigMap.data.config.yaml")
        return f"Kubernetes {kubernetes_version} schema, strict; Prometheus adapter rules"
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
