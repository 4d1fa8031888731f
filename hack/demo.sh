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
    # The operator publishes its executor catalogue (kubectl stepwise executors) in its
    # namespace, as it does when installed from deploy/.
    kubectl create namespace stepwise-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null

    if operator_running; then
        echo "The operator is already running (PID $(cat "${OPERATOR_PID}"))"
    else
        mkdir -p "${STATE}/pids" "${STATE}/logs"
        "${BIN}/stepwise-operator" --kubeconfig "${KUBECONFIG}" --enable-test-executors --leader-elect=false \
            --namespace=stepwise-system --plugin-dir "${BIN}/plugins" \
            --metrics-bind-address=127.0.0.1:8480 --health-probe-bind-address=127.0.0.1:8481 \
            >"${STATE}/logs/operator.log" 2>&1 &
        echo $! >"${OPERATOR_PID}"
        echo "Started the operator (PID $!, log .local/logs/operator.log, metrics http://127.0.0.1:8480/metrics)"
    fi

    for example in hello retire-kwok-node; do
        echo "Applying examples/${example}.yaml"
        kubectl apply -f "${ROOT}/examples/${example}.yaml" >/dev/null
    done
    watch_pipeline stepwise-demo hello
    watch_pipeline node-ops retire-demo-worker-1
    echo
    kubectl get swp -A
    cat <<EOT

Both pipelines are Ready: hello ran three steps, and retire-demo-worker-1 cordoned,
drained and deleted the kwok node demo-worker-1. Poke at them (bin/ holds kubectl and
the kubectl plugin kubectl-stepwise):
  export KUBECONFIG=${KUBECONFIG} PATH=${BIN}:\$PATH
  kubectl stepwise status hello -n stepwise-demo                # the steps, phase, attempts, duration
  kubectl stepwise executors                                    # what the operator offers
  kubectl -n stepwise-demo get events --field-selector involvedObject.name=hello
  kubectl -n stepwise-demo get configmap stepwise-record-hello -o jsonpath='{.data.calls}'
  kubectl -n stepwise-demo delete pipeline hello                # teardown runs, last step first
  kubectl stepwise status retire-demo-worker-1 -n node-ops
Stop everything with: make demo-down
EOT
}

# watch_pipeline prints a pipeline's progress, a line for each change, until it is Ready
# (or failed, or two minutes passed), then its status table.
watch_pipeline() {
    local ns="$1" name="$2"
    echo
    if ! "${BIN}/kubectl-stepwise" --kubeconfig "${KUBECONFIG}" -n "${ns}" watch "${name}" --timeout 2m | cat; then
        echo "  ${ns}/${name} is not Ready; see: bin/kubectl -n ${ns} describe pipeline ${name}" >&2
        return 1
    fi
    echo
    "${BIN}/kubectl-stepwise" --kubeconfig "${KUBECONFIG}" -n "${ns}" status "${name}"
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
