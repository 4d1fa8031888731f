#!/usr/bin/env bash
# Regenerates the CustomResourceDefinition in crd/ from the Go types in pkg/apis.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
CONTROLLER_GEN="${CONTROLLER_GEN:-${ROOT}/bin/controller-gen}"
OUT="${1:-${ROOT}/crd}"

cd "${ROOT}"
"${CONTROLLER_GEN}" crd paths=./pkg/apis/... output:crd:dir="${OUT}"
