#!/usr/bin/env python3
"""Consistency checks the API schemas cannot make (validate.sh runs this).

    check.py k8s RENDERED.yaml [EXAMPLE.yaml ...]   a rendered overlay
    check.py compose docker-compose.yml             the compose sharded profile

k8s: the shard StatefulSet's AUDITOR_SHARD_COUNT equals its replicas (and
the coordinator's, with the same URL template); the index comes from the pod
ordinal label; probes and scrape annotations name real ports; every pod
runs as uid 10001 with a read-only root and resource requests; every
ConfigMap, Secret and Service referenced exists (the externally created
Secrets as examples); $(VAR) references come after VAR; and when the shard
URLs are public, each shard's host is routed by the Ingress to a Service
that selects exactly that shard's pod.

compose: the sharded profile's shards have distinct indexes 0..n-1, a count
of n, and the coordinator's template and count.
"""

import re
import sys
from urllib.parse import urlsplit

import yaml

UID = 10001
EXTERNAL_SECRETS = {"ct-auditor-database", "ct-auditor-object-store"}
TLS_SECRETS = {"auditor-tls"}
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"

errors = []


def err(msg):
    errors.append(msg)


def env_value(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e
    return None


def pod_specs(objs):
    """(object, pod template) of every workload."""
    for o in objs:
        k = o["kind"]
        if k in ("Deployment", "StatefulSet"):
            yield o, o["spec"]["template"]
        elif k == "CronJob":
            yield o, o["spec"]["jobTemplate"]["spec"]["template"]


def check_pod(o, tpl, names):
    where = "%s/%s" % (o["kind"], o["metadata"]["name"])
    spec = tpl["spec"]
    psc = spec.get("securityContext", {})
    if psc.get("runAsUser") != UID or not psc.get("runAsNonRoot"):
        err("%s: pod must run as non-root uid %d" % (where, UID))
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    for v in vols.values():
        if "configMap" in v and v["configMap"]["name"] not in names["ConfigMap"]:
            err("%s: volume %s: no ConfigMap %s" % (where, v["name"], v["configMap"]["name"]))
        if "secret" in v and v["secret"]["secretName"] not in names["Secret"]:
            err("%s: volume %s: no Secret %s" % (where, v["name"], v["secret"]["secretName"]))
    ports_named = set()
    for c in spec["containers"]:
        cw = "%s container %s" % (where, c["name"])
        req = c.get("resources", {}).get("requests", {})
        if "cpu" not in req or "memory" not in req:
            err("%s: cpu and memory requests required" % cw)
        if "memory" not in c.get("resources", {}).get("limits", {}):
            err("%s: memory limit required" % cw)
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False or sc.get("readOnlyRootFilesystem") is not True:
            err("%s: allowPrivilegeEscalation false and readOnlyRootFilesystem true required" % cw)
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        ports_named |= {str(p) for p in ports.values()}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            p = c.get(probe)
            if not p:
                continue
            port = (p.get("httpGet") or p.get("tcpSocket") or {}).get("port")
            if isinstance(port, str) and port not in ports:
                err("%s: %s names no port %r" % (cw, probe, port))
        for m in c.get("volumeMounts", []):
            if m["name"] not in vols and not any(
                t["metadata"]["name"] == m["name"] for t in o["spec"].get("volumeClaimTemplates", [])
            ):
                err("%s: mount of unknown volume %s" % (cw, m["name"]))
        seen = set()
        for e in c.get("env", []):
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", e.get("value", "")):
                if ref not in seen:
                    err("%s: env %s uses $(%s) before it is defined" % (cw, e["name"], ref))
            seen.add(e["name"])
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref and ref["name"] not in names["Secret"]:
                err("%s: env %s: no Secret %s" % (cw, e["name"], ref["name"]))
            ref = e.get("valueFrom", {}).get("configMapKeyRef")
            if ref and ref["name"] not in names["ConfigMap"]:
                err("%s: env %s: no ConfigMap %s" % (cw, e["name"], ref["name"]))
        for ef in c.get("envFrom", []):
            if "secretRef" in ef and ef["secretRef"]["name"] not in names["Secret"]:
                err("%s: envFrom: no Secret %s" % (cw, ef["secretRef"]["name"]))
    ann = tpl.get("metadata", {}).get("annotations", {})
    if o["kind"] != "CronJob":
        if ann.get("prometheus.io/scrape") != "true" or not ann.get("prometheus.io/path"):
            err("%s: prometheus.io/scrape and path annotations required" % where)
        elif ann.get("prometheus.io/port") not in ports_named:
            err("%s: prometheus.io/port %r is no container port" % (where, ann.get("prometheus.io/port")))


def check_k8s(rendered, examples):
    objs = [o for o in yaml.safe_load_all(open(rendered)) if o]
    ex = [o for f in examples for o in yaml.safe_load_all(open(f)) if o]
    names = {"ConfigMap": set(), "Secret": set(EXTERNAL_SECRETS & {o["metadata"]["name"] for o in ex}), "Service": {}}
    for o in objs:
        if o["kind"] in ("ConfigMap", "Secret"):
            names[o["kind"]].add(o["metadata"]["name"])
        if o["kind"] == "Service":
            names["Service"][o["metadata"]["name"]] = o
    for o, tpl in pod_specs(objs):
        check_pod(o, tpl, names)

    sts = [o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "auditor"]
    if len(sts) != 1:
        err("one StatefulSet `auditor` expected, found %d" % len(sts))
        return
    sts = sts[0]
    replicas = sts["spec"].get("replicas", 1)
    shard = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "auditor-server")
    count = env_value(shard, "AUDITOR_SHARD_COUNT")
    if not count or count.get("value") != str(replicas):
        err("StatefulSet auditor: AUDITOR_SHARD_COUNT %r != replicas %d" % (count and count.get("value"), replicas))
    index = env_value(shard, "AUDITOR_SHARD_INDEX")
    if not index or index.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != POD_INDEX:
        err("StatefulSet auditor: AUDITOR_SHARD_INDEX must come from %s" % POD_INDEX)
    if shard.get("livenessProbe", {}).get("tcpSocket", {}).get("port") != "http":
        err("StatefulSet auditor: livenessProbe must be a TCP check of port http (/healthz is 503 until an epoch is served)")
    if shard.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
        err("StatefulSet auditor: readinessProbe must GET /readyz")
    svc = names["Service"].get(sts["spec"]["serviceName"])
    if not svc or svc["spec"].get("clusterIP") != "None":
        err("StatefulSet auditor: serviceName %s is no headless Service" % sts["spec"]["serviceName"])
    template = (env_value(shard, "AUDITOR_SHARD_URL_TEMPLATE") or {}).get("value", "")
    if "{i}" not in template and replicas > 1:
        err("StatefulSet auditor: AUDITOR_SHARD_URL_TEMPLATE without {i} for %d shards" % replicas)

    for cj in (o for o in objs if o["kind"] == "CronJob"):
        for c in cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]:
            cc = env_value(c, "AUDITOR_SHARD_COUNT")
            if cc and cc.get("value") != str(replicas):
                err("CronJob %s: AUDITOR_SHARD_COUNT %r != replicas %d" % (cj["metadata"]["name"], cc.get("value"), replicas))
            ct = env_value(c, "AUDITOR_SHARD_URL_TEMPLATE")
            if ct and ct.get("value") != template:
                err("CronJob %s: AUDITOR_SHARD_URL_TEMPLATE differs from the shards'" % cj["metadata"]["name"])

    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    ingresses = [o for o in objs if o["kind"] == "Ingress"]
    routes = {}
    for ing in ingresses:
        for t in ing["spec"].get("tls", []):
            if t.get("secretName") and t["secretName"] not in TLS_SECRETS:
                err("Ingress %s: unexpected TLS Secret %s" % (ing["metadata"]["name"], t["secretName"]))
        for rule in ing["spec"].get("rules", []):
            for p in rule.get("http", {}).get("paths", []):
                b = p["backend"]["service"]
                s = names["Service"].get(b["name"])
                if not s:
                    err("Ingress %s: no Service %s" % (ing["metadata"]["name"], b["name"]))
                    continue
                port = b["port"].get("name", b["port"].get("number"))
                if port not in [sp.get("name") for sp in s["spec"]["ports"]] + [sp["port"] for sp in s["spec"]["ports"]]:
                    err("Ingress %s: Service %s has no port %r" % (ing["metadata"]["name"], b["name"], port))
                if p.get("path") == "/":
                    routes[rule.get("host")] = s
    for s in names["Service"].values():
        sel = dict(s["spec"].get("selector", {}))
        pod = sel.pop("statefulset.kubernetes.io/pod-name", None)
        if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
            if not any(all(t["metadata"].get("labels", {}).get(k) == v for k, v in sel.items()) for _, t in pod_specs(objs)):
                err("Service %s selects no pod template" % s["metadata"]["name"])
        if pod is not None and pod not in ["auditor-%d" % i for i in range(replicas)]:
            err("Service %s selects pod %s, which is no shard of %d" % (s["metadata"]["name"], pod, replicas))
    if template.startswith("https://") and ingresses:
        for i in range(replicas):
            host = urlsplit(template.replace("{i}", str(i))).hostname
            s = routes.get(host)
            sel = (s or {}).get("spec", {}).get("selector", {})
            if replicas > 1 and sel.get("statefulset.kubernetes.io/pod-name") != "auditor-%d" % i:
                err("shard %d: Ingress host %s does not lead to a Service of pod auditor-%d" % (i, host, i))
            elif s is None:
                err("shard %d: no Ingress rule for host %s" % (i, host))


def check_compose(path):
    doc = yaml.safe_load(open(path))
    services = doc["services"]
    shards = {n: s for n, s in services.items() if "sharded" in s.get("profiles", []) and "AUDITOR_SHARD_INDEX" in s.get("environment", {})}
    if not shards:
        err("%s: no shard services in the sharded profile" % path)
        return
    n = len(shards)
    indexes = sorted(int(s["environment"]["AUDITOR_SHARD_INDEX"]) for s in shards.values())
    if indexes != list(range(n)):
        err("%s: shard indexes %s are not 0..%d" % (path, indexes, n - 1))
    templates = set()
    for name, s in shards.items():
        if str(s["environment"].get("AUDITOR_SHARD_COUNT")) != str(n):
            err("%s: %s: AUDITOR_SHARD_COUNT != %d" % (path, name, n))
        templates.add(s["environment"].get("AUDITOR_SHARD_URL_TEMPLATE"))
    coord = [s for s in services.values() if "sharded" in s.get("profiles", []) and "AUDITOR_SHARD_INDEX" not in s.get("environment", {}) and "AUDITOR_SHARD_COUNT" in s.get("environment", {})]
    if len(coord) != 1:
        err("%s: one coordinator expected in the sharded profile" % path)
    else:
        if str(coord[0]["environment"]["AUDITOR_SHARD_COUNT"]) != str(n):
            err("%s: coordinator AUDITOR_SHARD_COUNT != %d" % (path, n))
        templates.add(coord[0]["environment"].get("AUDITOR_SHARD_URL_TEMPLATE"))
    if len(templates) != 1 or None in templates:
        err("%s: shards and coordinator need one AUDITOR_SHARD_URL_TEMPLATE, got %s" % (path, templates))


def main(argv):
    if len(argv) >= 3 and argv[1] == "k8s":
        check_k8s(argv[2], argv[3:])
    elif len(argv) == 3 and argv[1] == "compose":
        check_compose(argv[2])
    else:
        sys.exit(__doc__)
    for e in errors:
        print("check.py: %s: %s" % (argv[2], e), file=sys.stderr)
    if errors:
        sys.exit(1)
    print("check.py: %s: consistent" % argv[2])


if __name__ == "__main__":
    main(sys.argv)
