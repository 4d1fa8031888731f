#!/usr/bin/env bash
# Builds main packages of the product module with ONE `go build`, so that the Go tool
# schedules every package of them together and keeps both cores busy (a sequence of builds
# leaves a core idle at every link):
#
#   hack/build.sh [--plugins "vsphere aws"] ./cmd/stepwise-operator ./hack/vcsim ...
#
# Commands land in bin/<name>, plugins (plugins/<name>) in bin/plugins/stepwise-plugin-<name>,
# and bin/plugins/SHA256SUMS is rewritten for every plugin there. GO_BUILD_FLAGS adds flags
# (hack/demo.sh passes -v to count packages as they compile).
#
# Every binary is static (CGO_ENABLED=0) and built with -trimpath, as the images and the
# Dockerfile build them: what runs from bin is what users run (a cgo build of the operator
# links Go's plugin package, through kubectl's drain, and is dynamically linked with every
# symbol exported: 9 MiB more resident), and hack/images.sh reuses this build's packages.
#
# The operator and kubectl-stepwise (./cmd/...) report `git describe --tags --always --dirty`
# with --version (STEPWISE_VERSION overrides it); without git or its history, dev and the
# commit go build stamped, if any. Only they get it: go build records -ldflags in every
# binary, and a plugin's checksum should not change with each commit.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="${LOCALBIN:-${ROOT}/bin}"
# go build -o DIR/ names each binary after its package directory; the staging directory
# keeps those names apart from the installed ones and lets go build skip up-to-date links.
STAGE="${BIN}/.build"

plugins=()
cmds=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --plugins) read -r -a plugins <<<"$2"; shift 2 ;;
        -*) echo "usage: $0 [--plugins \"NAME...\"] PACKAGE..." >&2; exit 2 ;;
        *) cmds+=("$1"); shift ;;
    esac
done
pkgs=("${cmds[@]}")
for p in "${plugins[@]}"; do
    [[ -f "${ROOT}/plugins/${p}/main.go" ]] || { echo "no plugin ${p}: plugins/${p}/main.go is missing" >&2; exit 2; }
    pkgs+=("./plugins/${p}")
done
[[ ${#pkgs[@]} -gt 0 ]] || exit 0

cd "${ROOT}"
version="${STEPWISE_VERSION:-}"
if [[ -z "${version}" ]] && command -v git >/dev/null; then
    version="$(git describe --tags --always --dirty 2>/dev/null)" || version=""
fi
[[ "${version}" != *[[:space:]]* ]] || { echo "version ${version@Q} has a space" >&2; exit 2; }
ldflags=()
if [[ -n "${version}" ]]; then
    ldflags=(-ldflags "./cmd/...=-X github.com/stepwise-dev/stepwise/internal/version.Version=${version}")
fi
mkdir -p "${STAGE}" "${BIN}/plugins"
# shellcheck disable=SC2086 # GO_BUILD_FLAGS is a list of flags
CGO_ENABLED=0 go build -trimpath ${GO_BUILD_FLAGS:-} "${ldflags[@]}" -o "${STAGE}/" "${pkgs[@]}"

# install -C copies only what changed, so an unchanged binary keeps its time stamp.
for c in "${cmds[@]}"; do
    install -C -m 0755 "${STAGE}/$(basename "${c}")" "${BIN}/$(basename "${c}")"
done
for p in "${plugins[@]}"; do
    install -C -m 0755 "${STAGE}/${p}" "${BIN}/plugins/stepwise-plugin-${p}"
done
cd "${BIN}/plugins"
if compgen -G 'stepwise-plugin-*' >/dev/null; then
    sha256sum stepwise-plugin-* >SHA256SUMS.tmp
    mv SHA256SUMS.tmp SHA256SUMS
else
    rm -f SHA256SUMS
fi
