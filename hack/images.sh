#!/usr/bin/env bash
# Builds Stepwise's container images without a container engine or a registry, as OCI
# archives: the operator's (the operator, the plugins of OPERATOR_PLUGINS and their
# SHA256SUMS, the layout of the Dockerfile) and each plugin's own (its binary alone). The
# binaries are static (hack/build.sh builds every binary so) and built for the images
# alone in LOCALBIN/image.
#
#   hack/images.sh                   # tag: git describe, or dev; archives in bin/images
#   IMAGE_TAG=v0.3.0 PLUGINS="vsphere" hack/images.sh
#   IMAGE_REPO=registry.example/platform ...   # names REPO/stepwise-operator:TAG
#   OPERATOR_PLUGINS="" ...          # an operator's image without plugins (they come from their own)
#   IMAGES_DIR=DIR ...               # write the archives there
#   SIGNING_KEY=stepwise-signing.key ... # sign each plugin binary (kubectl stepwise plugin
#                                    # keygen makes the key); its image holds the signature,
#                                    # and IMAGES_DIR/plugin-index.yaml (signed) lists them
#
# It prints each archive's name and digest, and for each plugin the image by digest and its
# binary's SHA-256: the chart's plugins[].image and plugins[].sha256. Load an archive into containerd with `ctr -n k8s.io images import`,
# or push it with `skopeo copy oci-archive:bin/images/stepwise-operator.tar docker://REPO/...`.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="${LOCALBIN:-${ROOT}/bin}"
STAGE="${BIN}/image"
OUT="${IMAGES_DIR:-${BIN}/images}"
cd "${ROOT}"
PLUGINS="${PLUGINS:-$(basename -a plugins/*/ | tr '\n' ' ')}"
OPERATOR_PLUGINS="${OPERATOR_PLUGINS-${PLUGINS}}"
TAG="${IMAGE_TAG:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
REPO="${IMAGE_REPO:+${IMAGE_REPO%/}/}"

LOCALBIN="${STAGE}" hack/build.sh --plugins "${PLUGINS}" ./cmd/stepwise-operator ./cmd/stepwise-copy
go build -o "${STAGE}/image" ./hack/image

# The operator's image holds OPERATOR_PLUGINS only, with their sums.
operator_plugins="${STAGE}/operator-plugins"
rm -rf "${operator_plugins}" && mkdir -p "${operator_plugins}"
: >"${operator_plugins}/SHA256SUMS"
for p in ${OPERATOR_PLUGINS}; do
    cp "${STAGE}/plugins/stepwise-plugin-${p}" "${operator_plugins}/"
    grep " stepwise-plugin-${p}\$" "${STAGE}/plugins/SHA256SUMS" >>"${operator_plugins}/SHA256SUMS"
done

mkdir -p "${OUT}"
images_out="${STAGE}/plugin-images.txt"
: >"${images_out}"
"${STAGE}/image" -operator "${STAGE}/stepwise-operator" -plugins "${operator_plugins}" \
    -tag "${REPO}stepwise-operator:${TAG}" -o "${OUT}/stepwise-operator.tar"
for p in ${PLUGINS}; do
    name="stepwise-plugin-${p}"
    rm -f "${STAGE}/plugins/${name}.sigstore.json" # a signature of an earlier build
    built="$("${STAGE}/image" -plugin "${STAGE}/plugins/${name}" ${SIGNING_KEY:+-signing-key "${SIGNING_KEY}"} \
        -tag "${REPO}${name}:${TAG}" -o "${OUT}/${name}.tar")"
    echo "${built}"
    # What the chart's plugins[] needs: the image by digest, and the binary's SHA-256.
    echo "${name}: image ${REPO}${name}@${built##* }" | tee -a "${images_out}"
    echo "${name}: binary sha256 $(grep " ${name}\$" "${STAGE}/plugins/SHA256SUMS" | cut -d' ' -f1)"
done

# Signed, the plugins make an index, signed with the same key, that kubectl stepwise
# plugin search and install read (--index OUT/plugin-index.yaml).
if [[ -n "${SIGNING_KEY:-}" ]]; then
    go run ./hack/plugin-index -images-out "${images_out}" -signing-key "${SIGNING_KEY}" -o "${OUT}/plugin-index.yaml"
    echo "plugin index: ${OUT}/plugin-index.yaml"
fi
