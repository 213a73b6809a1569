#!/usr/bin/env python3
"""Kubernetes OpenAPI v2 document -> JSON schemas for kubeconform, offline.

    openapi2schemas.py SWAGGER_JSON OUT_DIR
    openapi2schemas.py --crd OUT_DIR CRD.yaml ...

The second form writes one strict schema per version of each
CustomResourceDefinition (its openAPIV3Schema), named the same way:
servicemonitor-monitoring-v1.json, httproute-gateway-v1.json ...

SWAGGER_JSON is api/openapi-spec/swagger.json of the k8s.io/kubernetes Go
module (validate.sh fetches it through the Go module proxy). OUT_DIR gets
`_definitions.json` (every definition, made strict) and one small file per
group/version/kind, named as kubeconform's schema-location template
`{{ .ResourceKind }}{{ .KindSuffix }}.json` expects (statefulset-apps-v1.json,
service-v1.json, ingress-networking-v1.json ...), each a $ref into it.

Strict, as kubectl's client-side validation: an object schema that lists
its properties accepts no other property, so a misspelt field is an error.
Two string formats of the document are widened to what the API server
accepts: int-or-string (IntOrString: 8080 or "http") and quantities
(Quantity: "4Gi" or a bare number such as `cpu: 2`).
"""

import json
import os
import sys

DRAFT = "http://json-schema.org/draft-04/schema#"
INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def strict(node):
    """additionalProperties: false on every object schema with properties."""
    if isinstance(node, dict):
        if node.get("format") == "int-or-string":
            return dict(INT_OR_STRING)
        out = {k: strict(v) for k, v in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [strict(v) for v in node]
    return node


def kind_file(group, version, kind):
    # kubeconform's KindSuffix: "-<first label of the group>-<version>", or
    # "-<version>" for the core group.
    suffix = "-" + version if not group else "-%s-%s" % (group.split(".")[0], version)
    return (kind + suffix).lower() + ".json"


def crd_main(out_dir, files):
    import yaml

    os.makedirs(out_dir, exist_ok=True)
    n = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for crd in docs:
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for v in spec["versions"]:
                schema = v.get("schema", {}).get("openAPIV3Schema")
                if not schema:
                    continue
                fname = kind_file(spec["group"], v["name"], spec["names"]["kind"])
                with open(os.path.join(out_dir, fname), "w", encoding="utf-8") as f:
                    json.dump(dict(strict_crd(schema), **{"$schema": DRAFT}), f)
                n += 1
    if n == 0:
        sys.exit("openapi2schemas.py: no CustomResourceDefinition schema in %s" % files)
    print("openapi2schemas.py: %d custom resource schemas" % n)


def strict_crd(node):
    """strict() for a CRD's OpenAPI v3 schema: x-kubernetes-int-or-string
    widened, objects without properties left open."""
    if isinstance(node, dict):
        if node.get("x-kubernetes-int-or-string"):
            return dict(INT_OR_STRING)
        out = {k: strict_crd(v) for k, v in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [strict_crd(v) for v in node]
    return node


def main(argv):
    if len(argv) >= 3 and argv[1] == "--crd":
        crd_main(argv[2], argv[3:])
        return
    if len(argv) != 3:
        sys.exit("usage: openapi2schemas.py SWAGGER_JSON OUT_DIR")
    with open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    defs = doc.get("definitions")
    if not isinstance(defs, dict) or not defs:
        sys.exit("openapi2schemas.py: %s has no definitions" % argv[1])
    out_dir = argv[2]
    os.makedirs(out_dir, exist_ok=True)

    strict_defs = {name: strict(schema) for name, schema in defs.items()}
    if QUANTITY in strict_defs:
        q = strict_defs[QUANTITY]
        strict_defs[QUANTITY] = {
            "description": q.get("description", ""),
            "oneOf": [{"type": "string"}, {"type": "number"}],
        }
    with open(os.path.join(out_dir, "_definitions.json"), "w", encoding="utf-8") as f:
        json.dump({"$schema": DRAFT, "definitions": strict_defs}, f)

    written = {}
    for name, schema in sorted(defs.items()):
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            fname = kind_file(gvk.get("group", ""), gvk["version"], gvk["kind"])
            # Meta types (DeleteOptions, WatchEvent ...) carry every group's
            # GVK; a resource's own definition wins.
            if fname in written and name.startswith("io.k8s.apimachinery."):
                continue
            written[fname] = name
    for fname, name in written.items():
        with open(os.path.join(out_dir, fname), "w", encoding="utf-8") as f:
            json.dump({"$schema": DRAFT, "$ref": "_definitions.json#/definitions/" + name}, f)
    if not {"statefulset-apps-v1.json", "service-v1.json"} <= written.keys():
        sys.exit("openapi2schemas.py: no StatefulSet or Service schema in %s" % argv[1])
    print("openapi2schemas.py: %d kinds, %d definitions" % (len(written), len(defs)))


if __name__ == "__main__":
    main(sys.argv)
