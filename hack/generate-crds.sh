#!/usr/bin/env bash
# Writes the CustomResourceDefinitions generated from the Rust types into manifests/crd/ and the
# Helm chart's files/: `database-operator crd` prints them all; each goes to its own file.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" generate-crds
cargo run -q -- crd | python3 -c '
import sys
for document in sys.stdin.read().split("---\n"):
    name = next(l.split(": ", 1)[1] for l in document.splitlines() if l.startswith("  name: "))
    group_plural = {"databases.example.com": "databases", "databasebackups.example.com": "databasebackups"}[name]
    open(f"manifests/crd/example.com_{group_plural}.yaml", "w").write(document)
    chart = "crd.yaml" if group_plural == "databases" else "crd-databasebackups.yaml"
    open(f"charts/database-operator/files/{chart}", "w").write(document)
    print(f"wrote {name}", file=sys.stderr)
'
