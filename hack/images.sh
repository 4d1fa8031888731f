#!/usr/bin/env bash
# Builds Stepwise's container images without a container engine or a registry, as OCI
# archives in bin/images: the operator's (the operator, every plugin and their SHA256SUMS,
# the layout of the Dockerfile) and each plugin's own (its binary alone). The binaries are
# static (CGO_ENABLED=0) and built for the image alone in bin/image.
#
#   hack/images.sh                   # tag: git describe, or dev
#   IMAGE_TAG=v0.3.0 PLUGINS="vsphere" hack/images.sh
#
# Load one into containerd with `ctr -n k8s.io images import bin/images/stepwise-operator.tar`,
# or push it with `skopeo copy oci-archive:bin/images/stepwise-operator.tar docker://REGISTRY/...`.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="${LOCALBIN:-${ROOT}/bin}"
STAGE="${BIN}/image"
OUT="${BIN}/images"
cd "${ROOT}"
PLUGINS="${PLUGINS:-$(basename -a plugins/*/ | tr '\n' ' ')}"
TAG="${IMAGE_TAG:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"

CGO_ENABLED=0 LOCALBIN="${STAGE}" GO_BUILD_FLAGS="-trimpath" hack/build.sh --plugins "${PLUGINS}" ./cmd/stepwise-operator
go build -o "${STAGE}/image" ./hack/image

mkdir -p "${OUT}"
"${STAGE}/image" -operator "${STAGE}/stepwise-operator" -plugins "${STAGE}/plugins" \
    -tag "stepwise-operator:${TAG}" -o "${OUT}/stepwise-operator.tar"
for plugin in "${STAGE}"/plugins/stepwise-plugin-*; do
    name="$(basename "${plugin}")"
    "${STAGE}/image" -plugin "${plugin}" -tag "${name}:${TAG}" -o "${OUT}/${name}.tar"
done
