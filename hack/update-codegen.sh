#!/usr/bin/env bash
# Regenerates deepcopy functions, the typed clientset (with its fake), listers, informers
# and apply configurations from the types in pkg/apis.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${ROOT}"

# A tool-only import is not downloaded by any build: fetch the version go.mod records first,
# else `go list -m` prints an empty directory on a machine with an empty module cache.
go mod download k8s.io/code-generator
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
    echo "cannot find kube_codegen.sh of k8s.io/code-generator (module dir: '${CODEGEN_PKG}')" >&2
    exit 1
fi
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
