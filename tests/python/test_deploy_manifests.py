"""The Kubernetes manifests of deploy/kubernetes/ are valid and agree with each other.

- Every core-Kubernetes object validates against the Kubernetes API schemas that the
  kubernetes-validate package ships, strictly (an unknown field is an error, as with
  kubectl's default server-side field validation), for each Kubernetes version it has
  from MIN_K8S on.
- The InferencePool validates against its CRD's own schema (deploy/schemas/, the
  openAPIV3Schema of inference.networking.k8s.io/v1), with the CRD's two CEL rules
  checked here, and its metadata against Kubernetes' ObjectMeta.
- Cross-checks: the probes use the server's health paths, the Service and the
  InferencePool select the Deployment's pods on its container port, the HPA scales the
  Deployment on the queue gauge the server exports, the init container fetches the model
  the server loads, the drain fits the grace period, the API key comes from a Secret, and
  deploy/Containerfile's images listen on the pods' port as the pods' user.
- Negative cases: broken copies of the manifests must fail each of these validations, so
  that a validator that accepts everything fails this test.

Exits 77 (skipped) when kubernetes-validate or PyYAML is not installed (scripts/setup.sh
installs them into the venv)."""
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

try:
    import jsonschema
    import kubernetes_validate
    import yaml
    from kubernetes_validate.utils import all_versions
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

ROOT = Path(os.environ.get("TANDEM_SOURCE_DIR", Path(__file__).resolve().parents[2]))
MANIFESTS = ROOT / "deploy" / "kubernetes"
POOL_SCHEMA = ROOT / "deploy" / "schemas" / "inferencepool.inference.networking.k8s.io_v1.json"
# Oldest Kubernetes version validated against: autoscaling/v2 and every field used here
# exist from 1.30 on; the package ships a range of recent versions (1.30 to 1.37 in 1.37.0).
MIN_K8S = (1, 30)
# The server's health contract (GET /health: starting 503, ready 200, draining 503;
# GET /live: 200 whenever the process answers HTTP).
PROBE_PATHS = {"startupProbe": "/health", "readinessProbe": "/health", "livenessProbe": "/live"}
QUEUE_METRIC = "tandem_requests_queued"
DEFAULT_DRAIN_TIMEOUT = 30  # tandem serve --drain-timeout's default (apps/tandem/cmd_serve.cpp)

failures = []


def report(label, problems):
    """One ok/FAIL line per check; problems is a list of strings (empty: passed)."""
    if problems:
        failures.append(label)
        print(f"{label}: FAIL")
        for p in problems:
            print(f"    {p}")
    else:
        print(f"{label}: ok")


def expect_rejected(label, problems):
    """A negative case: the check must find something wrong with a broken manifest."""
    if problems:
        print(f"{label}: rejected as expected ({problems[0]}): ok")
    else:
        failures.append(label)
        print(f"{label}: FAIL (accepted a broken manifest)")


def load_manifests():
    """{file name: [documents]} for every YAML file of deploy/kubernetes/."""
    out = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        with open(path) as f:
            out[path.name] = [d for d in yaml.safe_load_all(f) if d]
    return out


# --- Kubernetes API schemas ------------------------------------------------------------

def k8s_versions():
    def key(v):
        return tuple(int(x) for x in v.split(".")[:2])
    # Each version is listed twice (its plain and its strict schema directory).
    return sorted({v for v in all_versions() if key(v) >= MIN_K8S}, key=key)


def k8s_problems(doc, version):
    try:
        kubernetes_validate.validate(doc, version, strict=True)
        return []
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        return [f"{path}: {e.message}"]
    except kubernetes_validate.SchemaNotFoundError as e:
        return [e.message]


# --- The InferencePool's CRD schema ----------------------------------------------------

def structural_to_jsonschema(node):
    """The CRD's openAPIV3Schema as a JSON Schema that jsonschema can check.

    The keywords it uses (type, properties, required, enum, pattern, min/max*, items,
    additionalProperties, default, format) mean the same in JSON Schema. The x-kubernetes-*
    extensions are the API server's (list semantics, CEL rules): dropped here, and the CEL
    rules checked by pool_cel_problems. An object with properties gets
    additionalProperties: false, unless it says otherwise: the API server prunes unknown
    fields, and kubectl's strict field validation reports them as errors."""
    if isinstance(node, list):
        return [structural_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k.startswith("x-kubernetes-"):
            continue
        if k in ("properties", "patternProperties", "definitions"):
            out[k] = {name: structural_to_jsonschema(s) for name, s in v.items()}
        else:
            out[k] = structural_to_jsonschema(v)
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def pool_validator():
    with open(POOL_SCHEMA) as f:
        schema = structural_to_jsonschema(json.load(f))
    # OpenAPI v3.0's schema object is a JSON Schema draft 4/5 dialect.
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def pool_cel_problems(pool):
    """The CRD's x-kubernetes-validations rules, as the API server would apply them."""
    spec = pool.get("spec", {})
    problems = []
    ref = spec.get("endpointPickerRef")
    # rule: self.kind != 'Service' || has(self.port)   (kind defaults to Service)
    if ref is not None and ref.get("kind", "Service") == "Service" and "port" not in ref:
        problems.append("endpointPickerRef: port is required when kind is 'Service' or unspecified")
    # rule: self.all(p1, self.exists_one(p2, p1.number==p2.number))
    numbers = [p.get("number") for p in spec.get("targetPorts", [])]
    if len(numbers) != len(set(numbers)):
        problems.append(f"targetPorts: port number must be unique, got {numbers}")
    return problems


def pool_problems(validator, pool, version):
    problems = [f"{'.'.join(map(str, e.path)) or '(root)'}: {e.message}"
                for e in validator.iter_errors(pool)]
    problems += pool_cel_problems(pool)
    if pool.get("apiVersion") != "inference.networking.k8s.io/v1" or pool.get("kind") != "InferencePool":
        problems.append(f"not an inference.networking.k8s.io/v1 InferencePool: "
                        f"{pool.get('apiVersion')} {pool.get('kind')}")
    # The CRD schema leaves metadata to the API server: check it as Kubernetes' ObjectMeta,
    # carried by the simplest object that has one.
    carrier = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": pool.get("metadata")}
    problems += [f"metadata: {p}" for p in k8s_problems(carrier, version)]
    return problems


# --- Cross-checks between the manifests ------------------------------------------------

def by_kind(manifests, kind):
    docs = [d for ds in manifests.values() for d in ds if d.get("kind") == kind]
    assert len(docs) == 1, f"expected one {kind}, found {len(docs)}"
    return docs[0]


def server_container(deploy):
    containers = deploy["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "tandem")


def arg_value(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def deployment_problems(deploy, pvc):
    problems = []
    pod = deploy["spec"]["template"]
    labels = pod["metadata"].get("labels", {})
    selector = deploy["spec"]["selector"].get("matchLabels", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"selector {selector} does not match the pod labels {labels}")
    if deploy["spec"].get("replicas", 1) < 1:
        problems.append("replicas < 1")
    c = server_container(deploy)
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if "http" not in ports:
        problems.append(f"no container port named http: {c.get('ports')}")
    for probe, path in PROBE_PATHS.items():
        get = c.get(probe, {}).get("httpGet")
        if not get:
            problems.append(f"{probe}: missing, or not an httpGet probe")
            continue
        if get.get("path") != path:
            problems.append(f"{probe}: path {get.get('path')!r}, expected {path!r}")
        if get.get("port") not in ("http", ports.get("http")):
            problems.append(f"{probe}: port {get.get('port')!r} is not the http container port")
    args = [str(a) for a in c.get("args", [])]
    # Stopping takes the preStop hook, then up to --drain-timeout: the grace period must be longer.
    drain = float(arg_value(args, "--drain-timeout", DEFAULT_DRAIN_TIMEOUT))
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    cmd = pre_stop.get("exec", {}).get("command", [])
    pre_stop_s = float(cmd[1]) if len(cmd) == 2 and cmd[0] == "sleep" else 0.0
    pre_stop_s += float(pre_stop.get("sleep", {}).get("seconds", 0))
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    if grace <= pre_stop_s + drain:
        problems.append(f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop_s:g} s + "
                        f"--drain-timeout {drain:g} s")
    # The key from a Secret, never in the manifest: tandem serve reads TANDEM_API_KEY, and
    # without a key it refuses 0.0.0.0 (--insecure would lift that).
    key = env_of(c).get("TANDEM_API_KEY", {})
    if "secretKeyRef" not in key.get("valueFrom", {}):
        problems.append("TANDEM_API_KEY does not come from a secretKeyRef")
    if "--api-key" in args or "--insecure" in args:
        problems.append("--api-key or --insecure on the command line")
    # tandem's --threads default is the node's cores, not the container's share.
    cpu_limit = str(c.get("resources", {}).get("limits", {}).get("cpu", ""))
    if arg_value(args, "--threads") != cpu_limit:
        problems.append(f"--threads {arg_value(args, '--threads')} is not the CPU limit {cpu_limit!r}")
    # The model volume is the PVC, and the init container fetches the file the server loads.
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    claim = volumes.get("models", {}).get("persistentVolumeClaim", {}).get("claimName")
    if claim != pvc["metadata"]["name"]:
        problems.append(f"volume models claims {claim!r}, not the PVC {pvc['metadata']['name']!r}")
    model_file = env_of(c).get("TANDEM_MODEL_FILE", {}).get("value")
    if arg_value(args, "--model") != "/models/models/$(TANDEM_MODEL_FILE)" or not model_file:
        problems.append(f"--model {arg_value(args, '--model')!r} is not the fetched model's path")
    inits = pod["spec"].get("initContainers", [])
    fetch = next((i for i in inits if i["name"] == "fetch-models"), None)
    if fetch is None:
        problems.append("no fetch-models init container")
    else:
        if env_of(fetch).get("TANDEM_MODEL_FILE", {}).get("value") != model_file:
            problems.append("the init container fetches another model than the server loads")
        if env_of(fetch).get("TANDEM_CACHE", {}).get("value") != "/models":
            problems.append("the init container's TANDEM_CACHE is not the volume (/models)")
        for ct in (fetch, c):
            mounts = {m["name"]: m["mountPath"] for m in ct.get("volumeMounts", [])}
            if mounts.get("models") != "/models":
                problems.append(f"{ct['name']}: the models volume is not mounted at /models")
    return problems


def service_problems(service, deploy):
    problems = []
    labels = deploy["spec"]["template"]["metadata"].get("labels", {})
    selector = service["spec"].get("selector", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"selector {selector} does not select the pods (labels {labels})")
    ports = {p.get("name"): p["containerPort"] for p in server_container(deploy).get("ports", [])}
    for p in service["spec"].get("ports", []):
        target = p.get("targetPort", p.get("port"))
        if target not in ports and target not in ports.values():
            problems.append(f"targetPort {target!r} is not a container port ({ports})")
    if not service["spec"].get("ports"):
        problems.append("no ports")
    return problems


def pool_selection_problems(pool, deploy):
    problems = []
    labels = deploy["spec"]["template"]["metadata"].get("labels", {})
    selector = pool["spec"]["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"selector {selector} does not select the pods (labels {labels})")
    ports = {p["containerPort"] for p in server_container(deploy).get("ports", [])}
    for p in pool["spec"]["targetPorts"]:
        if p["number"] not in ports:
            problems.append(f"targetPort {p['number']} is not a container port ({sorted(ports)})")
    return problems


def hpa_problems(hpa, deploy):
    problems = []
    ref = hpa["spec"]["scaleTargetRef"]
    want = {"apiVersion": "apps/v1", "kind": "Deployment", "name": deploy["metadata"]["name"]}
    if any(ref.get(k) != v for k, v in want.items()):
        problems.append(f"scaleTargetRef {ref} is not the Deployment {want}")
    if hpa["spec"].get("minReplicas", 1) < 1:
        problems.append("minReplicas < 1")
    names = [m["pods"]["metric"]["name"] for m in hpa["spec"].get("metrics", [])
             if m.get("type") == "Pods"]
    if QUEUE_METRIC not in names:
        problems.append(f"no Pods metric {QUEUE_METRIC} (found {names})")
    return problems


def containerfile_problems(text, deploy):
    """The images the Deployment runs, as deploy/Containerfile builds them."""
    problems = []
    port = next(p["containerPort"] for p in server_container(deploy)["ports"] if p["name"] == "http")
    entry = re.search(r'^ENTRYPOINT (\[.*"serve".*\])$', text, re.M)
    entry_args = json.loads(entry.group(1)) if entry else []
    if arg_value(entry_args, "--port") != str(port) or f"EXPOSE {port}" not in text:
        problems.append(f"the server image does not listen on and expose the container port {port}")
    if arg_value(entry_args, "--host") != "0.0.0.0":
        problems.append("the server image does not listen on 0.0.0.0")
    if not re.search(r"^FROM \S+ AS fetch-models$", text, re.M):
        problems.append("no fetch-models stage (the init container's image)")
    uid = deploy["spec"]["template"]["spec"]["securityContext"].get("runAsUser")
    users = re.findall(r"^USER (\d+)", text, re.M)
    if not users or any(int(u) != uid for u in users):
        problems.append(f"the images' USER {users} is not the pods' runAsUser {uid}")
    return problems


def server_flags():
    """The long options `tandem serve --help` lists (None where the binary is
    not built)."""
    tandem = Path(os.environ.get("TANDEM_BIN", ROOT / "build" / "tandem"))
    if not tandem.exists():
        return None
    out = subprocess.run([str(tandem), "serve", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out))


def args_problems(deploy, flags):
    """Every option the Deployment passes is one the server takes."""
    args = server_container(deploy).get("args", [])
    return [f"tandem serve has no option {a}" for a in args
            if a.startswith("--") and a.split("=")[0] not in flags]


def main():
    manifests = load_manifests()
    versions = k8s_versions()
    print(f"kubernetes-validate {kubernetes_validate.__version__}: schemas of Kubernetes "
          f"{', '.join(versions)}")
    if not versions:
        report("kubernetes versions", [f"none from {MIN_K8S} on in this kubernetes-validate"])
        return
    validator = pool_validator()
    span = f"{versions[0]} to {versions[-1]}" if len(versions) > 1 else versions[0]

    # Every file is either core Kubernetes, the InferencePool, or the kustomization.
    for name, docs in manifests.items():
        for doc in docs:
            label = f"{name}: {doc.get('kind')}/{doc.get('metadata', {}).get('name', '')}"
            if doc.get("kind") == "Kustomization":
                listed = sorted(doc.get("resources", []))
                present = sorted(n for n in manifests if n != name)
                report(f"{label} lists every manifest",
                       [] if listed == present else [f"resources {listed}, files {present}"])
            elif doc.get("kind") == "InferencePool":
                report(f"{label} against the CRD schema (metadata: Kubernetes {span})",
                       [f"{v}: {p}" for v in versions for p in pool_problems(validator, doc, v)])
            else:
                report(f"{label} against Kubernetes {span} (strict)",
                       [f"{v}: {p}" for v in versions for p in k8s_problems(doc, v)])

    deploy = by_kind(manifests, "Deployment")
    service = by_kind(manifests, "Service")
    pool = by_kind(manifests, "InferencePool")
    hpa = by_kind(manifests, "HorizontalPodAutoscaler")
    pvc = by_kind(manifests, "PersistentVolumeClaim")
    report("Deployment: probes, port, drain, key, threads, model volume",
           deployment_problems(deploy, pvc))
    report("Service selects the Deployment's pods on its port", service_problems(service, deploy))
    report("InferencePool selects the Deployment's pods on its port",
           pool_selection_problems(pool, deploy))
    report("HPA scales the Deployment on the queue gauge", hpa_problems(hpa, deploy))
    containerfile = (ROOT / "deploy" / "Containerfile").read_text()
    report("Containerfile: port, host, user, fetch-models stage",
           containerfile_problems(containerfile, deploy))
    flags = server_flags()
    if flags is not None:
        report("the server takes every option the Deployment passes", args_problems(deploy, flags))
        bad = copy.deepcopy(deploy)
        server_container(bad)["args"].append("--metrics-compatt")
        expect_rejected("Deployment passing a misspelt option", args_problems(bad, flags))
    prometheus = (ROOT / "src" / "server" / "prometheus.cpp").read_text()
    report(f"the server exports {QUEUE_METRIC}",
           [] if f'"{QUEUE_METRIC}"' in prometheus else ["not in src/server/prometheus.cpp"])

    # Negative cases: each validation must reject a broken copy.
    latest = versions[-1]
    bad = copy.deepcopy(deploy)
    server_container(bad)["livenessProbe"]["httpGet"]["paht"] = "/live"  # a misspelt field
    expect_rejected("Deployment with an unknown field", k8s_problems(bad, latest))
    bad = copy.deepcopy(deploy)
    server_container(bad)["ports"][0]["containerPort"] = "8080"  # a string, not an integer
    expect_rejected("Deployment with a string port", k8s_problems(bad, latest))
    bad = copy.deepcopy(pool)
    del bad["spec"]["targetPorts"]
    expect_rejected("InferencePool without targetPorts", pool_problems(validator, bad, latest))
    bad = copy.deepcopy(pool)
    bad["spec"]["targetPorts"] = [{"number": 8080}, {"number": 70000}]
    expect_rejected("InferencePool with port 70000", pool_problems(validator, bad, latest))
    bad = copy.deepcopy(pool)
    bad["spec"]["endpointPickerRef"]["portNumber"] = 9002  # an unknown field
    expect_rejected("InferencePool with an unknown field", pool_problems(validator, bad, latest))
    bad = copy.deepcopy(pool)
    del bad["spec"]["endpointPickerRef"]["port"]
    expect_rejected("InferencePool with a Service picker and no port",
                    pool_problems(validator, bad, latest))
    bad = copy.deepcopy(deploy)
    server_container(bad)["livenessProbe"]["httpGet"]["path"] = "/health"
    expect_rejected("Deployment with liveness on /health", deployment_problems(bad, pvc))
    bad = copy.deepcopy(service)
    bad["spec"]["selector"] = {"app.kubernetes.io/name": "other"}
    expect_rejected("Service selecting other pods", service_problems(bad, deploy))
    bad = copy.deepcopy(hpa)
    bad["spec"]["scaleTargetRef"]["name"] = "other"
    expect_rejected("HPA scaling another Deployment", hpa_problems(bad, deploy))
    expect_rejected("Containerfile exposing another port",
                    containerfile_problems(containerfile.replace("EXPOSE 8080", "EXPOSE 9090"), deploy))


if __name__ == "__main__":
    main()
    if failures:
        print(f"FAILED: {len(failures)}: {', '.join(failures)}")
        sys.exit(1)
    print("all ok")
