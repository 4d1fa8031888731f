#!/usr/bin/env bash
# Fails when deploy/base/ differs from what hack/gen-deploy renders from the Helm chart
# (charts/stepwise): the objects, the files they are grouped in and kustomization.yaml.
# namespace.yaml (written by hand) and crd.yaml (hack/verify-crd.sh checks it) are not
# gen-deploy's. HELM names the helm to run (the Makefile exports its own), bin/helm without it.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
export HELM="${HELM:-${ROOT}/bin/helm}"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

cd "${ROOT}"
go run ./hack/gen-deploy -out "${TMP}"
if ! diff -Naupr --exclude=namespace.yaml --exclude=crd.yaml "${ROOT}/deploy/base" "${TMP}"; then
    echo "deploy/base/ is out of date with charts/stepwise: run make generate (go run ./hack/gen-deploy)" >&2
    exit 1
fi
echo "deploy/base/ is what charts/stepwise renders"
