#!/usr/bin/env bash
# Fails when the committed Go code of the plugin protocol differs from what
# hack/update-proto.sh generates.
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT
OUT_DIR="${TMP}" "${ROOT}/hack/update-proto.sh"
for f in plugin.pb.go plugin_grpc.pb.go; do
  if ! diff -u "${ROOT}/pkg/plugin/proto/${f}" "${TMP}/${f}"; then
    echo "pkg/plugin/proto/${f} is stale: run hack/update-proto.sh (make proto)" >&2
    exit 1
  fi
done
echo "pkg/plugin/proto is up to date"
