#!/usr/bin/env bash
# Fails when the committed reference pages in docs/reference/ differ from what
# hack/gen-reference writes from the code (the operator's flags, the built-in executors'
# declarations, the reasons and Events).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT

cd "${ROOT}"
go run ./hack/gen-reference -out "${TMP}"
if ! diff -Naupr "${ROOT}/docs/reference" "${TMP}"; then
    echo "docs/reference/ is out of date: run make reference" >&2
    exit 1
fi
echo "docs/reference/ is up to date"
