#!/usr/bin/env python3
"""Consistency checks the API schemas cannot make (validate.sh runs this).

    check.py helm RENDERED.yaml [EXAMPLE.yaml ...] [--min-replicas N]
    check.py compose docker-compose.yml [--chart-values values.yaml]

helm (the chart rendered by `helm template`): every pod runs as uid 10001
with a read-only root, requests and a memory limit, and references only
ConfigMaps and Secrets that exist (the operator's Secrets as examples);
the groups are StatefulSets with constant indexes 0..n-1, AUDITOR_SHARD_COUNT
n and one URL template with {i}, at least N replicas each, liveness on
GET /livez and readiness GET /readyz, memory request = limit, a derived
max_concurrent_queries, a required anti-affinity over the group's own pods
and no database credentials; each group has a Service selecting its pods
alone, its own PodDisruptionBudget with maxUnavailable 1, and an Ingress
(and HTTPRoute) route of its URL's path to that Service, beside the route
of / for the manifest; the coordinator is one CronJob with
concurrencyPolicy Forbid, the same count and template, and object-store
credentials of its own; every alert parses as PromQL, uses only metrics auditor-server
exports (auditor-server/src/metrics.rs) and has a runbook section in
docs/operator.md; ServiceMonitors select Services with their ports; a
NetworkPolicy covers the group pods.

compose: the sharded profile mirrors the chart's values.yaml (groups,
replicas per group, the /g/{i} URLs of one front) with one coordinator.
"""

import os
import re
import sys
from urllib.parse import urlsplit

import promql_parser
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


def check_pod(o, tpl, names, annotations=True):
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
    if annotations and o["kind"] != "CronJob":
        if ann.get("prometheus.io/scrape") != "true" or not ann.get("prometheus.io/path"):
            err("%s: prometheus.io/scrape and path annotations required" % where)
        elif ann.get("prometheus.io/port") not in ports_named:
            err("%s: prometheus.io/port %r is no container port" % (where, ann.get("prometheus.io/port")))


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def probe_path(p):
    """The path a probe checks: httpGet's, or the URL an exec curl fetches."""
    if not p:
        return None
    if "httpGet" in p:
        return p["httpGet"].get("path")
    cmd = p.get("exec", {}).get("command", [])
    urls = [a for a in cmd if a.startswith("http://")]
    if cmd[:1] == ["curl"] and urls:
        return "/" + urls[-1].split("/", 3)[3]
    return None


def check_helm(rendered, examples, min_replicas, repo):
    objs = [o for o in yaml.safe_load_all(open(rendered)) if o]
    ex = [o for f in examples for o in yaml.safe_load_all(open(f)) if o]
    ex_secrets = {o["metadata"]["name"] for o in ex if o["kind"] == "Secret"}
    names = {"ConfigMap": set(), "Secret": set(ex_secrets), "Service": {}}
    for o in objs:
        if o["kind"] in ("ConfigMap", "Secret"):
            names[o["kind"]].add(o["metadata"]["name"])
        if o["kind"] == "Service":
            names["Service"][o["metadata"]["name"]] = o
    for o, tpl in pod_specs(objs):
        check_pod(o, tpl, names, annotations=False)

    groups = [o for o in objs if o["kind"] == "StatefulSet" and o["metadata"]["labels"].get("app.kubernetes.io/component") == "group"]
    if not groups:
        err("no group StatefulSets")
        return
    by_index = {}
    counts, templates, secrets = set(), set(), set()
    for sts in groups:
        where = "StatefulSet/%s" % sts["metadata"]["name"]
        c = next(c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "auditor-server")
        idx = (env_value(c, "AUDITOR_SHARD_INDEX") or {}).get("value")
        if idx is None or not idx.isdigit():
            err("%s: AUDITOR_SHARD_INDEX must be a constant group index" % where)
            continue
        if idx in by_index:
            err("%s: group %s also in %s" % (where, idx, by_index[idx]["metadata"]["name"]))
        by_index[idx] = sts
        counts.add((env_value(c, "AUDITOR_SHARD_COUNT") or {}).get("value"))
        templates.add((env_value(c, "AUDITOR_SHARD_URL_TEMPLATE") or {}).get("value"))
        if env_value(c, "DATABASE_URL"):
            err("%s: a group pod gets no database credentials" % where)
        if (env_value(c, "AUDITOR_SHARD_BUILD") or {}).get("value") != "false":
            err("%s: group pods must not build (AUDITOR_SHARD_BUILD=false): the builders do, with the write credentials" % where)
        secrets |= {ef["secretRef"]["name"] for ef in c.get("envFrom", []) if "secretRef" in ef}
        mcq = (env_value(c, "AUDITOR_MAX_CONCURRENT_QUERIES") or {}).get("value", "")
        if not mcq.isdigit() or int(mcq) < 16:
            err("%s: AUDITOR_MAX_CONCURRENT_QUERIES %r is not a derived count >= 16" % (where, mcq))
        if sts["spec"].get("replicas", 1) < min_replicas:
            err("%s: %d replicas, at least %d required" % (where, sts["spec"].get("replicas", 1), min_replicas))
        live, ready = probe_path(c.get("livenessProbe")), probe_path(c.get("readinessProbe"))
        if live != "/livez" or "httpGet" not in c.get("livenessProbe", {}):
            err("%s: livenessProbe must GET /livez, not %r" % (where, live))
        if ready != "/readyz" or "httpGet" not in c.get("readinessProbe", {}):
            err("%s: readinessProbe must GET /readyz" % where)
        res = c.get("resources", {})
        if res.get("requests", {}).get("memory") != res.get("limits", {}).get("memory"):
            err("%s: memory request must equal the limit (Guaranteed QoS)" % where)
        pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        anti = sts["spec"]["template"]["spec"].get("affinity", {}).get("podAntiAffinity", {})
        if not any(
            t.get("topologyKey") == "kubernetes.io/hostname" and labels_match(t["labelSelector"]["matchLabels"], pod_labels)
            and t["labelSelector"]["matchLabels"].get("ct-auditor/group") == idx
            for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        ):
            err("%s: a required podAntiAffinity on kubernetes.io/hostname over its own group's pods is missing" % where)
        svc = names["Service"].get(sts["spec"]["serviceName"])
        if not svc or svc["spec"].get("clusterIP") != "None":
            err("%s: serviceName %s is no headless Service" % (where, sts["spec"]["serviceName"]))
    n = len(by_index)
    if sorted(by_index, key=int) != [str(i) for i in range(n)]:
        err("group indexes %s are not 0..%d" % (sorted(by_index, key=int), n - 1))
    if counts != {str(n)}:
        err("AUDITOR_SHARD_COUNT %s differs from the %d groups" % (sorted(map(str, counts)), n))
    if len(templates) != 1 or None in templates or "{i}" not in next(iter(templates)):
        err("the groups need one AUDITOR_SHARD_URL_TEMPLATE with {i}, got %s" % templates)
        return
    template = next(iter(templates))

    cronjobs = [o for o in objs if o["kind"] == "CronJob"]
    component = lambda o: o["metadata"]["labels"].get("app.kubernetes.io/component")
    coordinators = [o for o in cronjobs if component(o) == "coordinator"]
    builders = [o for o in cronjobs if component(o) == "builder"]
    if len(coordinators) != 1 or len(builders) != 1 or len(cronjobs) != 2:
        err("one coordinator and one builder CronJob expected, found %s" % sorted(component(o) for o in cronjobs))
    secrets_of = lambda c: {ef["secretRef"]["name"] for ef in c.get("envFrom", []) if "secretRef" in ef}
    writer_secrets = {n for cj in coordinators for c in cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"] for n in secrets_of(c)}
    for cj in builders:
        where = "CronJob %s" % cj["metadata"]["name"]
        job = cj["spec"]["jobTemplate"]["spec"]
        if job.get("completionMode") != "Indexed" or job.get("completions") != n:
            err("%s: an Indexed Job of %d completions (one per group) expected, got %s of %s" % (where, n, job.get("completionMode"), job.get("completions")))
        if not job.get("backoffLimitPerIndex"):
            err("%s: a failed index must be retried on its own (backoffLimitPerIndex)" % where)
        for c in job["template"]["spec"]["containers"]:
            args = c.get("args", [])
            if "--shard-index" not in args or args[args.index("--shard-index") + 1 :][:1] != ["$(JOB_COMPLETION_INDEX)"]:
                err("%s: the builder must build group $(JOB_COMPLETION_INDEX), args %s" % (where, args))
            if env_value(c, "DATABASE_URL"):
                err("%s: a builder gets no database credentials" % where)
            mine = secrets_of(c)
            if not mine or mine & secrets or mine & writer_secrets:
                err("%s: the builders' object-store credentials must be their own, not the groups' %s or the coordinator's %s" % (where, sorted(secrets), sorted(writer_secrets)))
    for cj in cronjobs:
        if cj["spec"].get("concurrencyPolicy") != "Forbid":
            err("CronJob %s: concurrencyPolicy must be Forbid" % cj["metadata"]["name"])
        for c in cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]:
            if (env_value(c, "AUDITOR_SHARD_COUNT") or {}).get("value") != str(n):
                err("CronJob %s: AUDITOR_SHARD_COUNT != %d" % (cj["metadata"]["name"], n))
            if (env_value(c, "AUDITOR_SHARD_URL_TEMPLATE") or {}).get("value") != template:
                err("CronJob %s: AUDITOR_SHARD_URL_TEMPLATE differs from the groups'" % cj["metadata"]["name"])
            writer = {ef["secretRef"]["name"] for ef in c.get("envFrom", []) if "secretRef" in ef}
            if not writer or writer & secrets:
                err("CronJob %s: the coordinator's object-store credentials must be its own, not the groups' %s" % (cj["metadata"]["name"], sorted(secrets)))

    # Per group: a Service selecting exactly its pods, a PDB keeping all
    # but one, and a route of its URL's path on the public host.
    pdbs = [o for o in objs if o["kind"] == "PodDisruptionBudget"]
    url = urlsplit(template)
    routes = {}
    for ing in (o for o in objs if o["kind"] == "Ingress"):
        for rule in ing["spec"].get("rules", []):
            for p in rule.get("http", {}).get("paths", []):
                routes[("ingress", rule.get("host"), p.get("path"), p.get("pathType"))] = p["backend"]["service"]["name"]
    for hr in (o for o in objs if o["kind"] == "HTTPRoute"):
        for host in hr["spec"].get("hostnames", [None]):
            for rule in hr["spec"].get("rules", []):
                for m in rule.get("matches", []):
                    path = m.get("path", {})
                    for b in rule.get("backendRefs", []):
                        routes[("httproute", host, path.get("value"), path.get("type"))] = b["name"]
    kinds = {k[0] for k in routes}
    if not kinds:
        err("no Ingress or HTTPRoute routes the public host")
    for idx, sts in by_index.items():
        pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        others = [s for i, s in by_index.items() if i != idx]
        mine = [
            name for name, s in names["Service"].items()
            if s["spec"].get("clusterIP") != "None"
            and labels_match(s["spec"].get("selector", {}), pod_labels)
            and not any(labels_match(s["spec"]["selector"], o["spec"]["template"]["metadata"]["labels"]) for o in others)
        ]
        if not mine:
            err("group %s: no Service selects its pods alone" % idx)
        budget = [p for p in pdbs if labels_match(p["spec"]["selector"].get("matchLabels", {}), pod_labels)
                  and not any(labels_match(p["spec"]["selector"]["matchLabels"], o["spec"]["template"]["metadata"]["labels"]) for o in others)]
        if len(budget) != 1:
            err("group %s: %d PodDisruptionBudgets of its own, 1 expected" % (idx, len(budget)))
        elif budget[0]["spec"].get("maxUnavailable") != 1:
            err("group %s: PodDisruptionBudget must allow maxUnavailable 1" % idx)
        g = urlsplit(template.replace("{i}", idx))
        for kind in kinds:
            ptype = "Prefix" if kind == "ingress" else "PathPrefix"
            backend = routes.get((kind, g.hostname, g.path, ptype))
            if backend is None:
                err("group %s: %s has no %s route for %s%s" % (idx, kind, ptype, g.hostname, g.path))
            elif backend not in mine:
                err("group %s: %s routes %s%s to %s, not to a Service of the group's pods" % (idx, kind, g.hostname, g.path, backend))
    for kind in kinds:
        ptype = "Prefix" if kind == "ingress" else "PathPrefix"
        if (kind, url.hostname, "/", ptype) not in routes:
            err("%s: no route of / (the manifest) on %s" % (kind, url.hostname))

    # Monitoring: alerts on metrics the server really exports, each with a
    # runbook section.
    exported = set(re.findall(r'"(auditor_[a-z0-9_]+)"', open(repo + "/auditor-server/src/metrics.rs").read()))
    runbook = open(repo + "/docs/operator.md").read()
    want = {"CtAuditorNoEpochPublished", "CtAuditorPublishTimedOut", "CtAuditorGroupDegraded",
            "CtAuditorServerErrors", "CtAuditorOverloaded", "CtAuditorObjectStoreErrors"}
    alerts = set()
    for pr in (o for o in objs if o["kind"] == "PrometheusRule"):
        for grp in pr["spec"]["groups"]:
            for r in grp["rules"]:
                if "alert" not in r:
                    continue
                alerts.add(r["alert"])
                try:
                    promql_parser.parse(r["expr"])
                except Exception as e:  # the parser's own error type
                    err("alert %s: the expression does not parse: %s" % (r["alert"], e))
                for metric in re.findall(r"\b(auditor_[a-z0-9_]+)", r["expr"]):
                    if metric not in exported:
                        err("alert %s: auditor-server exports no metric %s" % (r["alert"], metric))
                if "#### Alert %s" % r["alert"] not in runbook:
                    err("alert %s: no runbook section `#### Alert %s` in docs/operator.md" % (r["alert"], r["alert"]))
    if [o for o in objs if o["kind"] == "PrometheusRule"] and not want <= alerts:
        err("PrometheusRule lacks alerts %s" % sorted(want - alerts))
    for sm in (o for o in objs if o["kind"] == "ServiceMonitor"):
        sel = sm["spec"]["selector"]["matchLabels"]
        hit = [s for s in names["Service"].values() if labels_match(sel, s["metadata"].get("labels", {}))]
        if not hit:
            err("ServiceMonitor %s selects no Service" % sm["metadata"]["name"])
        for s in hit:
            ports = {p.get("name") for p in s["spec"]["ports"]}
            for e in sm["spec"]["endpoints"]:
                if e.get("port") not in ports:
                    err("ServiceMonitor %s: Service %s has no port %r" % (sm["metadata"]["name"], s["metadata"]["name"], e.get("port")))
    group_labels = groups[0]["spec"]["template"]["metadata"]["labels"]
    if not any(o["kind"] == "NetworkPolicy" and labels_match(o["spec"]["podSelector"].get("matchLabels", {}), group_labels) for o in objs):
        err("no NetworkPolicy selects the group pods")


def check_compose(path, chart_values):
    """The sharded profile mirrors the chart: groups x replicas, every
    index 0..n-1 served by the chart's replicas per group, servers that do
    not build and one builder per group, one URL template on the front's
    path, the coordinator with the same count and template."""
    doc = yaml.safe_load(open(path))
    services = doc["services"]
    shards = {n: s for n, s in services.items() if "sharded" in s.get("profiles", []) and "AUDITOR_SHARD_INDEX" in s.get("environment", {})}
    if not shards:
        err("%s: no group services in the sharded profile" % path)
        return
    per_index = {}
    for name, s in shards.items():
        per_index.setdefault(int(s["environment"]["AUDITOR_SHARD_INDEX"]), []).append(name)
    n = len(per_index)
    if sorted(per_index) != list(range(n)):
        err("%s: group indexes %s are not 0..%d" % (path, sorted(per_index), n - 1))
    values = yaml.safe_load(open(chart_values))
    if n != values["groups"]:
        err("%s: %d groups, the chart's values.yaml has %d" % (path, n, values["groups"]))
    for i, names in sorted(per_index.items()):
        if len(names) != values["replicasPerGroup"]:
            err("%s: group %d has %d replicas (%s), the chart's values.yaml %d" % (path, i, len(names), names, values["replicasPerGroup"]))
    templates = set()
    for name, s in shards.items():
        if str(s["environment"].get("AUDITOR_SHARD_COUNT")) != str(n):
            err("%s: %s: AUDITOR_SHARD_COUNT != %d" % (path, name, n))
        templates.add(s["environment"].get("AUDITOR_SHARD_URL_TEMPLATE"))
    for name, s in shards.items():
        if str(s["environment"].get("AUDITOR_SHARD_BUILD")) != "false":
            err("%s: %s: group servers must not build (AUDITOR_SHARD_BUILD: \"false\"), as the chart's" % (path, name))
    builders = {n: s for n, s in services.items() if "sharded" in s.get("profiles", []) and "BUILDER_GROUP" in s.get("environment", {})}
    built = sorted(int(s["environment"]["BUILDER_GROUP"]) for s in builders.values())
    if built != list(range(n)):
        err("%s: builders for groups %s, one per group 0..%d expected" % (path, built, n - 1))
    for name, s in builders.items():
        if str(s["environment"].get("AUDITOR_SHARD_COUNT")) != str(n):
            err("%s: %s: AUDITOR_SHARD_COUNT != %d" % (path, name, n))
        templates.add(s["environment"].get("AUDITOR_SHARD_URL_TEMPLATE"))
    coord = [s for s in services.values() if "sharded" in s.get("profiles", []) and "AUDITOR_SHARD_INDEX" not in s.get("environment", {}) and "BUILDER_GROUP" not in s.get("environment", {}) and "AUDITOR_SHARD_COUNT" in s.get("environment", {})]
    if len(coord) != 1:
        err("%s: one coordinator expected in the sharded profile" % path)
    else:
        if str(coord[0]["environment"]["AUDITOR_SHARD_COUNT"]) != str(n):
            err("%s: coordinator AUDITOR_SHARD_COUNT != %d" % (path, n))
        templates.add(coord[0]["environment"].get("AUDITOR_SHARD_URL_TEMPLATE"))
    if len(templates) != 1 or None in templates:
        err("%s: groups and coordinator need one AUDITOR_SHARD_URL_TEMPLATE, got %s" % (path, templates))
        return
    template = next(iter(templates))
    prefix = values["groupPathPrefix"]
    if not template.endswith("%s/{i}" % prefix):
        err("%s: AUDITOR_SHARD_URL_TEMPLATE %s is not <front>%s/{i} as in the chart" % (path, template, prefix))


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["helm", "compose"])
    ap.add_argument("file")
    ap.add_argument("examples", nargs="*")
    ap.add_argument("--min-replicas", type=int, default=2)
    ap.add_argument("--chart-values")
    args = ap.parse_args(argv[1:])
    repo = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if args.mode == "helm":
        check_helm(args.file, args.examples, args.min_replicas, repo)
    else:
        check_compose(args.file, args.chart_values or os.path.join(repo, "deploy/helm/ct-auditor/values.yaml"))
    for e in errors:
        print("check.py: %s: %s" % (args.file, e), file=sys.stderr)
    if errors:
        sys.exit(1)
    print("check.py: %s: consistent" % args.file)


if __name__ == "__main__":
    main(sys.argv)
