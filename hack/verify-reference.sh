#!/usr/bin/env bash
# Fails when the committed reference pages in docs/reference/ differ from what
# hack/gen-reference writes from the code (the operator's flags, the built-in executors'
# declarations, the reasons and Events), and the Grafana dashboard in deploy/grafana/ differs
# from what hack/gen-grafana writes from the metrics' names, or the chart's alert rules from
# what hack/gen-rules writes (pkg/alerts).
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
go run ./hack/gen-grafana -o "${TMP}/grafana/stepwise-dashboard.json"
if ! diff -u "${ROOT}/deploy/grafana/stepwise-dashboard.json" "${TMP}/grafana/stepwise-dashboard.json"; then
    echo "deploy/grafana/stepwise-dashboard.json is out of date: run make reference" >&2
    exit 1
fi
go run ./hack/gen-rules -o "${TMP}/prometheus-rules.yaml"
if ! diff -u "${ROOT}/charts/stepwise/files/prometheus-rules.yaml" "${TMP}/prometheus-rules.yaml"; then
    echo "charts/stepwise/files/prometheus-rules.yaml is out of date: run make reference" >&2
    exit 1
fi
echo "docs/reference/, deploy/grafana/stepwise-dashboard.json and the alert rules are up to date"
