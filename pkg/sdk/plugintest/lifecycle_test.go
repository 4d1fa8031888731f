package plugintest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// tickets is a fake remote API: tickets by ID, open or closed, and the ID each
// idempotency key made when dedupe is on. Once reject is set (Remote.Fail), every ticket
// is rejected.
type tickets struct {
	mu     sync.Mutex
	open   map[string]bool
	byKey  map[string]string
	dedupe bool
	reject bool
}

func newTickets(dedupe bool) *tickets {
	return &tickets{open: map[string]bool{}, byKey: map[string]string{}, dedupe: dedupe}
}

func (r *tickets) create(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.byKey[key]; ok && r.dedupe {
		return id
	}
	id := fmt.Sprintf("T-%d", len(r.open)+1)
	r.open[id], r.byKey[key] = true, id
	return id
}

// close closes a ticket and tells whether it was open: false is the API's "already
// closed" (409) or "no such ticket" (404).
func (r *tickets) close(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasOpen := r.open[id]
	if _, ok := r.open[id]; ok {
		r.open[id] = false
	}
	return wasOpen
}

func (r *tickets) rejected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reject
}

// remote is the fake as Lifecycle and CrashReplay see it; Count counts closed tickets too,
// as the ticket plugin's fake does.
func (r *tickets) remote() Remote {
	return Remote{
		Exists: func(_ context.Context, created map[string]string) (bool, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.open[created["ticket"]], nil
		},
		Count: func(context.Context) (int, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.open), nil
		},
		Fail: func(context.Context) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.reject = true
			return nil
		},
	}
}

// ticketExecutor opens a ticket, waits once for its approval, and closes it in Delete from
// the record; its faults are switches.
type ticketExecutor struct {
	sdk.Base
	api *tickets
	// forget keeps the ID in State only. recordLate keeps it in State while waiting and
	// records it only once approved: the classic leak. openLate waits for a change window
	// first and fails at once, recording nothing, when the ticket it opens is rejected.
	// closeNothing skips the close. goneFails fails the close of a ticket already closed,
	// as if the API's "409 already closed" were an error.
	forget, recordLate, openLate, closeNothing, goneFails bool
}

func (ticketExecutor) Name() string { return "test.ticket" }

func (e ticketExecutor) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if id := req.State["ticket"]; id != "" {
		if e.api.rejected() {
			return sdk.Result{}, sdk.Permanent("TicketRejected", fmt.Errorf("ticket %s was rejected", id))
		}
		res := sdk.DoneWithOutputs("approved", map[string]string{"ticketID": id})
		if e.recordLate {
			return res.WithCreated(map[string]string{"ticket": id}), nil
		}
		return res, nil
	}
	if e.openLate && req.State["window"] == "" {
		return sdk.Wait(time.Second, "waiting for the change window").WithState(map[string]string{"window": "open"}), nil
	}
	id := e.api.create(req.IdempotencyKey)
	if e.openLate && e.api.rejected() {
		// The error loses the answer: the ticket this call opened is recorded nowhere.
		return sdk.Result{}, sdk.Permanent("TicketRejected", fmt.Errorf("ticket %s was rejected", id))
	}
	res := sdk.Wait(time.Second, "opened "+id).WithState(map[string]string{"ticket": id})
	if e.forget || e.recordLate {
		return res, nil
	}
	return res.WithCreated(map[string]string{"ticket": id}), nil
}

func (e ticketExecutor) Delete(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	id := req.Created["ticket"]
	switch {
	case id == "":
		return sdk.Done("no ticket was opened"), nil
	case e.closeNothing:
		return sdk.Done("closed"), nil
	case !e.api.close(id) && e.goneFails:
		return sdk.Result{}, fmt.Errorf("close %s: 409 Conflict: the ticket is closed", id)
	}
	return sdk.Done("closed"), nil
}

func TestLifecycleAndCrashReplay(t *testing.T) {
	const (
		leftAtWait   = "deleted at Create's first wait: Create made 1 thing(s)"
		leftAtFail   = "Create failed after its first wait (Remote.Fail): Create made 1 thing(s)"
		deleteTwice  = "the teardown run again with the same record"
		noRecord     = "created nothing its teardown can find"
		leftOpen     = "still exists"
		twoPerReplay = "made 2 things, not 1"
	)
	tests := []struct {
		name   string
		dedupe bool
		exec   func(api *tickets) ticketExecutor
		// The failure each check reports, "" for none: Lifecycle with a Remote that can
		// Fail, Lifecycle with one that cannot, CrashReplay.
		lifecycle, withoutFail, replay string
	}{
		{
			name: "a ticket recorded, closed in Delete, opened once per key", dedupe: true,
			exec: func(api *tickets) ticketExecutor { return ticketExecutor{api: api} },
		},
		{
			name: "the ID kept in State only", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, forget: true} },
			lifecycle: noRecord, withoutFail: noRecord, replay: noRecord,
		},
		{
			// Create to done, then teardown, passes: only a teardown during the wait, which
			// gets the record and no State, shows the ticket left open.
			name: "the classic leak: the ID in State while waiting, recorded once approved", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, recordLate: true} },
			lifecycle: leftAtWait, withoutFail: leftAtWait,
		},
		{
			// Nothing is made before the first wait: only the failure shows the leak.
			name: "a ticket opened after a wait by the call that fails", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, openLate: true} },
			lifecycle: leftAtFail,
		},
		{
			// A crash after the close and before the status write runs the teardown again.
			name: "a Delete that fails on already closed", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, goneFails: true} },
			lifecycle: deleteTwice, withoutFail: deleteTwice,
		},
		{
			name: "a teardown that leaves the ticket open", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, closeNothing: true} },
			lifecycle: leftOpen, withoutFail: leftOpen, replay: leftOpen,
		},
		{
			name:   "a remote API that ignores the idempotency key",
			exec:   func(api *tickets) ticketExecutor { return ticketExecutor{api: api} },
			replay: twoPerReplay,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, check := range []struct {
				name string
				want string
				run  func(tb testing.TB, r Runner, remote Remote)
			}{
				{"Lifecycle", tt.lifecycle, func(tb testing.TB, r Runner, remote Remote) {
					Lifecycle(tb, r, "test.ticket", nil, remote)
				}},
				{"Lifecycle without Remote.Fail", tt.withoutFail, func(tb testing.TB, r Runner, remote Remote) {
					remote.Fail = nil
					Lifecycle(tb, r, "test.ticket", nil, remote)
				}},
				{"CrashReplay", tt.replay, func(tb testing.TB, r Runner, remote Remote) {
					CrashReplay(tb, r, "test.ticket", nil, remote)
				}},
			} {
				api := newTickets(tt.dedupe)
				r := InProcess(t, tt.exec(api))
				got := Failures(t, func(tb testing.TB) { check.run(tb, r, api.remote()) })
				if check.want == "" {
					assert.Empty(t, got, check.name)
					continue
				}
				assert.True(t, strings.Contains(strings.Join(got, "\n"), check.want), "%s reports %q: %v", check.name, check.want, got)
			}
		})
	}
}

// A correct executor's tickets are all closed after Lifecycle, in each of its runs, and a
// Remote without Count is refused rather than half-checked.
func TestLifecycleLeavesNothingOpen(t *testing.T) {
	api := newTickets(true)
	remote := api.remote()
	created := Lifecycle(t, InProcess(t, ticketExecutor{api: api}), "test.ticket", nil, remote)
	assert.Equal(t, map[string]string{"ticket": "T-1"}, created)
	n, err := remote.Count(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 3, n, "a ticket a run: to done, deleted at the first wait, failed after it")
	for id := range n {
		open, err := remote.Exists(t.Context(), map[string]string{"ticket": fmt.Sprintf("T-%d", id+1)})
		require.NoError(t, err)
		assert.False(t, open, "T-%d", id+1)
	}

	remote.Count = nil
	got := Failures(t, func(tb testing.TB) { Lifecycle(tb, InProcess(t, ticketExecutor{api: api}), "test.ticket", nil, remote) })
	assert.Equal(t, []string{"plugintest: Lifecycle needs Remote.Exists and Remote.Count"}, got)
}
