#!/usr/bin/env bash
# Regenerates the Go code of the plugin protocol (pkg/plugin/proto) with protoc and the
# pinned protoc-gen-go / protoc-gen-go-grpc from ./bin (make proto-tools).
# OUT_DIR writes somewhere else (hack/verify-proto.sh uses it).
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROTOC=${PROTOC:-protoc}
PROTOC_GEN_GO=${PROTOC_GEN_GO:-${ROOT}/bin/protoc-gen-go-v1.36.12}
PROTOC_GEN_GO_GRPC=${PROTOC_GEN_GO_GRPC:-${ROOT}/bin/protoc-gen-go-grpc-v1.6.0}
OUT_DIR=${OUT_DIR:-${ROOT}/pkg/plugin/proto}

command -v "${PROTOC}" >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
mkdir -p "${OUT_DIR}"
cd "${ROOT}/pkg/plugin/proto"
"${PROTOC}" \
  --plugin=protoc-gen-go="${PROTOC_GEN_GO}" \
  --plugin=protoc-gen-go-grpc="${PROTOC_GEN_GO_GRPC}" \
  --go_out="${OUT_DIR}" --go_opt=paths=source_relative \
  --go-grpc_out="${OUT_DIR}" --go-grpc_opt=paths=source_relative \
  plugin.proto
