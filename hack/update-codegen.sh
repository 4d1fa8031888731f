#!/usr/bin/env bash
# Regenerates deepcopy functions, the typed clientset (with its fake), listers, informers
# and apply configurations from the types in pkg/apis.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
# kube_codegen.sh installs its generators into GOBIN: keep them in the project's bin/.
export GOBIN="${GOBIN:-${ROOT}/bin}"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

MODULE="github.com/stepwise-dev/stepwise"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --output-dir "${ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${ROOT}/pkg/apis"
