#!/usr/bin/env bash
# Regenerates the CustomResourceDefinitions from the Go types in pkg/apis, and their two
# copies: deploy/base/crd.yaml (kustomize reads no file outside deploy/base/) and
# charts/stepwise/crds/ (Helm installs a chart's crds/ first). With an argument, writes the
# three under that folder instead of the repository (hack/verify-crd.sh).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
CONTROLLER_GEN="${CONTROLLER_GEN:-${ROOT}/bin/controller-gen}"
OUT="${1:-${ROOT}}"

mkdir -p "${OUT}/crd" "${OUT}/deploy/base" "${OUT}/charts/stepwise/crds"
cd "${ROOT}"
"${CONTROLLER_GEN}" crd paths=./pkg/apis/stepwise/... output:crd:dir="${OUT}/crd"
for f in "${OUT}"/crd/*.yaml; do echo '---'; cat "${f}"; done > "${OUT}/deploy/base/crd.yaml"
rm -f "${OUT}"/charts/stepwise/crds/*.yaml
cp "${OUT}"/crd/*.yaml "${OUT}/charts/stepwise/crds/"
