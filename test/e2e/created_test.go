package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// ticketAPI is the API plugins/ticket expects (its README), on loopback: a ticket is
// approved at its first GET.
type ticketAPI struct {
	mu     sync.Mutex
	status map[string]string
	byKey  map[string]string
	*httptest.Server
}

func newTicketAPI(t *testing.T) *ticketAPI {
	a := &ticketAPI{status: map[string]string{}, byKey: map[string]string{}}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, id string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": id, "status": a.status[id]})
	}
	mux.HandleFunc("POST /tickets", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		key := r.Header.Get("Idempotency-Key")
		if _, ok := a.byKey[key]; !ok {
			id := fmt.Sprintf("T-%d", len(a.status)+1)
			a.status[id], a.byKey[key] = "open", id
		}
		reply(w, http.StatusCreated, a.byKey[key])
	})
	mux.HandleFunc("GET /tickets/{id}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		id := r.PathValue("id")
		if a.status[id] == "open" {
			a.status[id] = "approved"
		}
		reply(w, http.StatusOK, id)
	})
	mux.HandleFunc("POST /tickets/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.status[r.PathValue("id")] = "closed"
		reply(w, http.StatusOK, r.PathValue("id"))
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *ticketAPI) statusOf(id string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status[id]
}

// TestTeardownClosesWhatThePluginRecorded: the ticket plugin, a process of its own, opens a
// ticket and records it (protocol version 4); the step's status keeps the record, not as an
// output; deleting the pipeline hands it to the plugin's Delete, which closes the ticket.
func TestTeardownClosesWhatThePluginRecorded(t *testing.T) {
	t.Parallel()
	api := newTicketAPI(t)
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", false)
	client := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns)
	p := recordPipeline(ns, "change", "runner", v1alpha1.Step{Name: "ticket", Executor: "ticket.approval",
		With: map[string]string{"url": api.URL, "summary": "retire worker-7", "interval": "1s"}})
	_, err := client.Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)

	done := waitPipeline(t, ns, "change", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	step := done.Status.Steps[0]
	assert.Equal(t, map[string]string{"ticket": "T-1"}, step.Created)
	assert.Equal(t, map[string]string{"ticketID": "T-1"}, step.Outputs, "the record is not an output")
	assert.Equal(t, "approved", api.statusOf("T-1"))

	require.NoError(t, client.Delete(ctx, "change", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := client.Get(ctx, "change", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the pipeline was not deleted; operator log %s", operator.Log)
	assert.Equal(t, "closed", api.statusOf("T-1"), "its teardown closed what Create recorded")
}
