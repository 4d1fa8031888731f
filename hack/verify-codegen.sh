#!/usr/bin/env bash
# Fails when the committed generated code differs from what hack/update-codegen.sh makes.
# It regenerates in a copy of the tree, so the working tree is never touched.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

cd "${ROOT}"
tar --exclude=./bin --exclude=./.local --exclude=./.git -cf - . | tar -xf - -C "${TMP}"
GOBIN="${ROOT}/bin" "${TMP}/hack/update-codegen.sh" >/dev/null

status=0
for dir in pkg/generated pkg/apis; do
    if ! diff -Naupr "${ROOT}/${dir}" "${TMP}/${dir}"; then
        status=1
    fi
done
if [[ ${status} -ne 0 ]]; then
    echo "generated code is out of date: run hack/update-codegen.sh (make generate)" >&2
    exit 1
fi
echo "generated code is up to date"
