#!/usr/bin/env bash
# The product module and hack/localcluster compile many of the same packages (k8s.io/api,
# client-go, apimachinery, x/net, ...). When both select the same version of every module
# they both build from, and build with the same flags (CGO_ENABLED=0 -trimpath: hack/build.sh
# and hack/localcluster.mk), Go's build cache compiles those packages once, and a cold
# `make demo` or `make test` does less work. This fails when the versions drift.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

# modules prints "path version" for every module a build of the packages reads code from.
modules() {
    go list -deps -f '{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}' "$@" | sort -u
}

product="$(cd "${ROOT}" && modules ./...)"
localcluster="$(cd "${ROOT}/hack/localcluster" && modules .)"
drift="$(join <(echo "${product}") <(echo "${localcluster}") | awk '$2 != $3 {print "  " $1 ": product " $2 ", hack/localcluster " $3}')"
if [[ -n "${drift}" ]]; then
    echo "the product module and hack/localcluster build from different versions of:" >&2
    echo "${drift}" >&2
    echo "align them (go get MODULE@VERSION in the module with the older one, then go mod tidy) so the build cache shares their packages" >&2
    exit 1
fi
echo "the product module and hack/localcluster share $(join <(echo "${product}") <(echo "${localcluster}") | wc -l) modules at the same versions"
