#!/usr/bin/env bash
# Fails when the committed CRD in crd/ differs from what the Go types generate.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

"${ROOT}/hack/update-crd.sh" "${TMP}"
# crd/ also holds the Go tests of the CRD; only the YAML is generated.
if ! diff -Naupr --exclude="*.go" "${ROOT}/crd" "${TMP}"; then
    echo "crd/ is out of date: run hack/update-crd.sh (make generate)" >&2
    exit 1
fi
echo "crd/ is up to date"
