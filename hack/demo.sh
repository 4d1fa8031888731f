#!/usr/bin/env bash
# make demo: a local control plane, the CRD, the operator and a first pipeline, with its
# progress printed until it is Ready. `hack/demo.sh down` stops what `up` started.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${ROOT}/.local"
BIN="${ROOT}/bin"
KUBECONFIG="${STATE}/kubeconfig"
OPERATOR_PID="${STATE}/pids/operator.pid"
kubectl() { "${BIN}/kubectl" --kubeconfig "${KUBECONFIG}" "$@"; }

# operator_running tells whether the recorded PID is alive and still our operator, so a
# recycled PID is never mistaken for it (or killed).
operator_running() {
    [[ -f "${OPERATOR_PID}" ]] || return 1
    local pid
    pid="$(cat "${OPERATOR_PID}")"
    [[ -r "/proc/${pid}/cmdline" ]] && tr '\0' ' ' < "/proc/${pid}/cmdline" | grep -q "^${BIN}/stepwise-operator "
}

up() {
    "${BIN}/localcluster" up --dir "${STATE}" --kwok "${BIN}/kwok" --kwok-stages "${BIN}/kwok-stages.yaml"

    echo "Installing the Pipeline CRD"
    kubectl apply --server-side -f "${ROOT}/crd/" >/dev/null
    kubectl wait --for=condition=Established --timeout=60s crd/pipelines.stepwise.dev >/dev/null

    if operator_running; then
        echo "The operator is already running (PID $(cat "${OPERATOR_PID}"))"
    else
        mkdir -p "${STATE}/pids" "${STATE}/logs"
        "${BIN}/stepwise-operator" --kubeconfig "${KUBECONFIG}" --enable-test-executors --leader-elect=false \
            --metrics-bind-address=127.0.0.1:8480 --health-probe-bind-address=127.0.0.1:8481 \
            >"${STATE}/logs/operator.log" 2>&1 &
        echo $! >"${OPERATOR_PID}"
        echo "Started the operator (PID $!, log .local/logs/operator.log, metrics http://127.0.0.1:8480/metrics)"
    fi

    echo "Applying examples/hello.yaml"
    kubectl apply -f "${ROOT}/examples/hello.yaml" >/dev/null
    echo
    local last="" line
    for _ in $(seq 1 120); do
        line="$(kubectl -n stepwise-demo get pipeline hello -o jsonpath='{.status.phase} {.status.progress} |{range .status.steps[*]} {.name}={.phase}{end}')"
        if [[ "${line}" != "${last}" ]]; then
            echo "  ${line}"
            last="${line}"
        fi
        if kubectl -n stepwise-demo wait --for=condition=Ready --timeout=0 pipeline/hello >/dev/null 2>&1; then
            break
        fi
        sleep 0.5
    done
    echo
    kubectl -n stepwise-demo get swp
    cat <<EOT

The pipeline is Ready. Poke at it:
  export KUBECONFIG=${KUBECONFIG}
  bin/kubectl -n stepwise-demo get pipeline hello -o yaml        # per-step status and conditions
  bin/kubectl -n stepwise-demo get events --field-selector involvedObject.name=hello
  bin/kubectl -n stepwise-demo get configmap stepwise-record-hello -o jsonpath='{.data.calls}'
  bin/kubectl -n stepwise-demo delete pipeline hello             # teardown runs, last step first
Stop everything with: make demo-down
EOT
}

down() {
    if operator_running; then
        local pid
        pid="$(cat "${OPERATOR_PID}")"
        kill -TERM "${pid}"
        for _ in $(seq 1 60); do
            operator_running || break
            sleep 0.5
        done
        operator_running && kill -KILL "${pid}"
        echo "Stopped the operator (PID ${pid})"
    fi
    rm -f "${OPERATOR_PID}"
    if [[ -x "${BIN}/localcluster" ]]; then
        "${BIN}/localcluster" down --dir "${STATE}"
    fi
}

case "${1:-up}" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 [up|down]" >&2; exit 2 ;;
esac
