#!/usr/bin/env bash
# make demo: build what the demo runs, start a local control plane with kwok nodes, a vCenter
# simulator and the operator with its vSphere plugin, then run two pipelines to Ready: hello
# (three test steps) and the retirement of a kwok node whose VM is in the simulator (cordon,
# drain past a PodDisruptionBudget, destroy the VM through the plugin, delete the Node).
# Every phase is timed. `hack/demo.sh down` stops what `up` started, by recorded PID.
# `PLUGIN=NAME hack/demo.sh dev` (make dev PLUGIN=NAME) starts the same control plane and the
# operator with plugins/NAME only, for a plugin author to try it by hand. OPERATOR_ARGS adds
# flags to the operator's (make dev PLUGIN=NAME OPERATOR_ARGS="-v=4 --hook-call-timeout=1m").
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="${ROOT}/.local"
BIN="${ROOT}/bin"
KUBECONFIG="${STATE}/kubeconfig"
PIDS="${STATE}/pids"
LOGS="${STATE}/logs"
OPERATOR_PID="${PIDS}/operator.pid"
VCSIM_PID="${PIDS}/vcsim.pid"
VCSIM_DIR="${STATE}/vcsim"
# The VM the demo's kwok node demo-worker-1 runs on: its providerID in examples/kwok-worker.yaml.
DEMO_VM="demo-worker-1=4210f0a4-5d2e-4b7c-9a3e-6c1d2b8e7f01"
# What a cold build (empty Go caches) took on 2 cores when this was last measured; see the
# README.
COLD_BUILD="about 7 minutes"

kubectl() { "${BIN}/kubectl" --kubeconfig "${KUBECONFIG}" "$@"; }
stepwise() { "${BIN}/kubectl-stepwise" --kubeconfig "${KUBECONFIG}" "$@"; }

START=$(date +%s)
# elapsed prints seconds as 1m05s.
elapsed() { local s=$1; if (( s >= 60 )); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "${s}"; fi; }
# phase NAME CMD... runs CMD and prints how long it took and the total so far.
phase() {
    local name="$1" t0
    shift
    t0=$(date +%s)
    echo "==> ${name}"
    "$@"
    local now
    now=$(date +%s)
    printf '    done: %s in %s (total %s)\n' "${name}" "$(elapsed $((now - t0)))" "$(elapsed $((now - START)))"
}

# running PIDFILE BINARY tells whether the PID recorded in PIDFILE is alive and still runs BINARY, so a
# recycled PID is never mistaken for ours (or killed).
running() {
    local pidfile="$1" binary="$2" pid
    [[ -f "${pidfile}" ]] || return 1
    pid="$(cat "${pidfile}")"
    [[ -r "/proc/${pid}/cmdline" ]] && tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q "^${binary} "
}

# stop PIDFILE BINARY sends SIGTERM to the recorded process, SIGKILL after 30 s.
stop() {
    local pidfile="$1" binary="$2" what="$3" pid
    if running "${pidfile}" "${binary}"; then
        pid="$(cat "${pidfile}")"
        kill -TERM "${pid}"
        for _ in $(seq 1 60); do
            running "${pidfile}" "${binary}" || break
            sleep 0.5
        done
        running "${pidfile}" "${binary}" && kill -KILL "${pid}"
        echo "Stopped ${what} (PID ${pid})"
    fi
    rm -f "${pidfile}"
}

# build runs both builds at once (the product module's binaries in one go build, the control
# plane's module in another: make -j2), logging to .local/logs/build.log and printing how
# many packages have compiled every 20 seconds.
build() {
    local log="${LOGS}/build.log" pid
    echo "    the operator, kubectl-stepwise, the vSphere plugin, the vCenter simulator, and the"
    echo "    control plane (etcd, kube-apiserver, controller-manager, scheduler, kubectl, kwok)."
    echo "    A cold build compiles Kubernetes once: ${COLD_BUILD} on 2 cores; later runs take seconds."
    echo "    Log: .local/logs/build.log"
    make -C "${ROOT}" --no-print-directory -j2 demo-build GO_BUILD_FLAGS=-v LOCALCLUSTER_GO_BUILD_FLAGS=-v >"${log}" 2>&1 &
    pid=$!
    local t0 waited=0
    t0=$(date +%s)
    while kill -0 "${pid}" 2>/dev/null; do
        sleep 1
        waited=$((waited + 1))
        if (( waited % 20 == 0 )); then
            # go build -v prints each package it compiles; everything else is go's own talk.
            printf '    %s: %d packages compiled, %d modules downloaded\n' "$(elapsed $(($(date +%s) - t0)))" \
                "$(grep -cv -e '^go: ' -e '^cd ' -e '^LOCALBIN=' -e '^ln ' -e '^mkdir' "${log}" || true)" \
                "$(grep -c '^go: downloading' "${log}" || true)"
        fi
    done
    if ! wait "${pid}"; then
        echo "The build failed; the end of .local/logs/build.log:" >&2
        tail -n 30 "${log}" >&2
        return 1
    fi
}

cluster_up() {
    "${BIN}/localcluster" up --dir "${STATE}" --kwok "${BIN}/kwok" --kwok-stages "${BIN}/kwok-stages.yaml" | sed 's/^/    /'
}

vcsim_up() {
    if running "${VCSIM_PID}" "${BIN}/vcsim"; then
        echo "    the vCenter simulator is already running (PID $(cat "${VCSIM_PID}"))"
        return
    fi
    rm -f "${VCSIM_DIR}/ready"
    "${BIN}/vcsim" serve --dir "${VCSIM_DIR}" --vm "${DEMO_VM}" >"${LOGS}/vcsim.log" 2>&1 &
    echo $! >"${VCSIM_PID}"
    for _ in $(seq 1 120); do
        [[ -f "${VCSIM_DIR}/ready" ]] && break
        running "${VCSIM_PID}" "${BIN}/vcsim" || { cat "${LOGS}/vcsim.log" >&2; return 1; }
        sleep 0.5
    done
    [[ -f "${VCSIM_DIR}/ready" ]] || { echo "the simulator did not start; see .local/logs/vcsim.log" >&2; return 1; }
    echo "    serving $(cat "${VCSIM_DIR}/url") (PID $(cat "${VCSIM_PID}"), log .local/logs/vcsim.log); its VMs:"
    "${BIN}/vcsim" vms --dir "${VCSIM_DIR}" | sed 's/^/      /'
}

crd() {
    kubectl apply --server-side -f "${ROOT}/crd/" >/dev/null
    kubectl wait --for=condition=Established --timeout=60s crd/pipelines.stepwise.dev >/dev/null
    # The operator publishes its executor catalogue (kubectl stepwise executors) in its
    # namespace, as it does when installed from deploy/.
    kubectl create namespace stepwise-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

# operator_up starts the operator with the plugins in bin/plugins and waits until the
# executor catalogue lists what matches $1 (by default the demo's vSphere executor).
operator_up() {
    local wait_for="${1:-vsphere.terminate-vm}"
    if running "${OPERATOR_PID}" "${BIN}/stepwise-operator"; then
        echo "    the operator is already running (PID $(cat "${OPERATOR_PID}"))"
    else
        # The vCenter stand-in, and a plugin author's fake API, listen on loopback, which
        # plugins may reach only when allowed. Its metrics are on loopback, in plain HTTP.
        "${BIN}/stepwise-operator" --kubeconfig "${KUBECONFIG}" --enable-test-executors --leader-elect=false \
            --namespace=stepwise-system --plugin-dir "${BIN}/plugins" --plugin-allowed-cidrs=127.0.0.0/8 \
            --metrics-bind-address=127.0.0.1:8480 --metrics-secure=false --health-probe-bind-address=127.0.0.1:8481 \
            ${OPERATOR_ARGS:-} >"${LOGS}/operator.log" 2>&1 &
        echo $! >"${OPERATOR_PID}"
        echo "    started (PID $!, log .local/logs/operator.log, metrics http://127.0.0.1:8480/metrics)"
    fi
    # The catalogue lists a plugin's executors once the operator has started the plugin.
    for _ in $(seq 1 120); do
        stepwise executors 2>/dev/null | grep -q -- "${wait_for}" && break
        running "${OPERATOR_PID}" "${BIN}/stepwise-operator" || { tail -n 20 "${LOGS}/operator.log" >&2; return 1; }
        sleep 0.5
    done
    # Name, version and who serves it: the descriptions are for `kubectl stepwise executors`.
    stepwise executors | awk 'NR == 1 {$3 = "SERVED BY"} {printf "    %-22s %-9s %s\n", $1, $2, $3}'
}

pipelines() {
    kubectl apply -f "${ROOT}/examples/hello.yaml" >/dev/null
    echo "    applied examples/hello.yaml"
    # The workload must run on demo-worker-1 before the retirement starts, so the drain has
    # pods to evict.
    kubectl apply -f "${ROOT}/examples/kwok-worker.yaml" >/dev/null
    kubectl -n shop rollout status deployment/web --timeout=2m >/dev/null
    echo "    applied examples/kwok-worker.yaml; the pods of shop/web run on demo-worker-1:"
    kubectl -n shop get pods -o wide --no-headers | awk '{print "      " $1, $3, $7}'
    kubectl create namespace node-ops --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl -n node-ops create secret generic vsphere-credentials --dry-run=client -o yaml \
        --from-file=url="${VCSIM_DIR}/url" --from-file=username="${VCSIM_DIR}/username" \
        --from-file=password="${VCSIM_DIR}/password" --from-file=ca.crt="${VCSIM_DIR}/ca.crt" | kubectl apply -f - >/dev/null
    kubectl apply -f "${ROOT}/examples/retire-kwok-node.yaml" >/dev/null
    echo "    created the Secret node-ops/vsphere-credentials from the simulator's login; applied examples/retire-kwok-node.yaml"
    watch_pipeline stepwise-demo hello
    watch_pipeline node-ops retire-demo-worker-1
    echo
    echo "    the pods of shop/web, evicted from demo-worker-1, run on demo-worker-2 now:"
    kubectl -n shop get pods -o wide --no-headers | awk '{print "      " $1, $3, $7}'
    echo "    the simulator's VMs now (demo-worker-1 is gone):"
    "${BIN}/vcsim" vms --dir "${VCSIM_DIR}" | sed 's/^/      /'
}

# watch_pipeline prints a pipeline's progress, a line for each change, until it is Ready
# (or failed, or two minutes passed), then its status table.
watch_pipeline() {
    local ns="$1" name="$2"
    echo
    if ! stepwise -n "${ns}" watch "${name}" --timeout 2m | cat; then
        echo "  ${ns}/${name} is not Ready; see: bin/kubectl -n ${ns} describe pipeline ${name}" >&2
        return 1
    fi
    echo
    stepwise -n "${ns}" status "${name}"
}

up() {
    mkdir -p "${PIDS}" "${LOGS}"
    phase "Building" build
    phase "Starting the control plane" cluster_up
    phase "Starting the vCenter simulator" vcsim_up
    phase "Installing the Pipeline CRD" crd
    phase "Starting the operator and its plugins" operator_up
    phase "Running the pipelines" pipelines
    echo
    kubectl get swp -A
    cat <<EOT

Both pipelines are Ready, $(elapsed $(($(date +%s) - START))) after make demo started. hello ran three test steps;
retire-demo-worker-1 cordoned demo-worker-1, drained it through the Eviction API (which
holds a pod back while the PodDisruptionBudget allows no disruption), had the vSphere plugin
(its own process) shut the VM's guest down and destroy the VM, and deleted the Node.
Look around (bin/ holds kubectl and the kubectl plugin kubectl-stepwise):
  export KUBECONFIG=${KUBECONFIG} PATH=${BIN}:\$PATH
  kubectl stepwise status retire-demo-worker-1 -n node-ops  # steps, attempts, messages, outputs
  bin/vcsim vms --dir .local/vcsim                           # the VM demo-worker-1 is gone
  ps -o pid,ppid,args --ppid \$(cat .local/pids/operator.pid) # the plugin: its own process, child of the operator
  grep plugin/ .local/logs/operator.log | head               # what the plugin logged, tagged with its path
  kubectl stepwise executors                                 # built-in and plugin executors on offer
  kubectl -n node-ops get events --field-selector involvedObject.name=retire-demo-worker-1
  kubectl -n stepwise-demo delete pipeline hello             # teardown runs, last step first
Stop everything with: make demo-down
EOT
}

# dev starts a local control plane and the operator with one plugin, plugins/$PLUGIN, built
# alone into bin/plugins (with its SHA256SUMS), and says how to use them.
dev() {
    local plugin="${PLUGIN:?usage: make dev PLUGIN=<dir under plugins/>}"
    [[ -f "${ROOT}/plugins/${plugin}/main.go" ]] || { echo "no plugin plugins/${plugin}/main.go" >&2; exit 2; }
    mkdir -p "${PIDS}" "${LOGS}"
    rm -rf "${BIN}/plugins" # the operator loads every plugin there: only this one
    phase "Building the operator, kubectl-stepwise, the control plane and plugins/${plugin}" \
        make -C "${ROOT}" --no-print-directory -j2 dev-build PLUGIN="${plugin}"
    phase "Starting the control plane" cluster_up
    phase "Installing the CRDs" crd
    phase "Starting the operator with plugins/${plugin}" operator_up "stepwise-plugin-${plugin}"
    cat <<EOT

The operator runs with plugins/${plugin} (log .local/logs/operator.log; plugins may reach
loopback, so a fake API on 127.0.0.1 works). Try it:
  export KUBECONFIG=${KUBECONFIG} PATH=${BIN}:\$PATH
  kubectl stepwise executors                      # your executors, served by your plugin
  kubectl create namespace try && kubectl -n try create serviceaccount runner
  kubectl apply -f your-pipeline.yaml             # spec.serviceAccountName: runner
  kubectl stepwise status NAME -n try
After a change: make plugin NAME=${plugin}, then make demo-down and make dev PLUGIN=${plugin}
again (the operator checks a plugin's SHA-256 when it starts). Stop everything: make demo-down
EOT
}

down() {
    stop "${OPERATOR_PID}" "${BIN}/stepwise-operator" "the operator"
    stop "${VCSIM_PID}" "${BIN}/vcsim" "the vCenter simulator"
    if [[ -x "${BIN}/localcluster" ]]; then
        "${BIN}/localcluster" down --dir "${STATE}"
    fi
}

case "${1:-up}" in
    up) up ;;
    dev) dev ;;
    down) down ;;
    *) echo "usage: $0 [up|dev|down]" >&2; exit 2 ;;
esac
