#!/usr/bin/env bash
# Fails when a committed CRD (crd/, deploy/base/crd.yaml, charts/stepwise/crds/) differs
# from what the Go types generate.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

"${ROOT}/hack/update-crd.sh" "${TMP}"
stale=0
# crd/ also holds the Go tests of the CRD; only the YAML is generated.
diff -Naupr --exclude="*.go" "${ROOT}/crd" "${TMP}/crd" || stale=1
diff -Nau "${ROOT}/deploy/base/crd.yaml" "${TMP}/deploy/base/crd.yaml" || stale=1
diff -Naupr "${ROOT}/charts/stepwise/crds" "${TMP}/charts/stepwise/crds" || stale=1
if [ "${stale}" -ne 0 ]; then
    echo "the CRDs are out of date: run hack/update-crd.sh (make generate)" >&2
    exit 1
fi
echo "the CRDs (crd/, deploy/base/crd.yaml, charts/stepwise/crds/) are up to date"
