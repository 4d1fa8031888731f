package plugintest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// tickets is a fake remote API: tickets by ID, open or closed, and the ID each
// idempotency key made when dedupe is on.
type tickets struct {
	mu     sync.Mutex
	open   map[string]bool
	byKey  map[string]string
	dedupe bool
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

func (r *tickets) close(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.open[id]; ok {
		r.open[id] = false
	}
}

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
	}
}

// ticketExecutor opens a ticket, waits once, and closes it in Delete from the record; its
// faults are switches.
type ticketExecutor struct {
	sdk.Base
	api *tickets
	// forget keeps the ID in State only, closeNothing skips the close.
	forget, closeNothing bool
}

func (ticketExecutor) Name() string { return "test.ticket" }

func (e ticketExecutor) Create(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if id := req.State["ticket"]; id != "" {
		return sdk.DoneWithOutputs("approved", map[string]string{"ticketID": id}), nil
	}
	id := e.api.create(req.IdempotencyKey)
	res := sdk.Wait(time.Second, "opened "+id).WithState(map[string]string{"ticket": id})
	if e.forget {
		return res, nil
	}
	return res.WithCreated(map[string]string{"ticket": id}), nil
}

func (e ticketExecutor) Delete(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if req.Created["ticket"] == "" {
		return sdk.Result{}, errors.New("no ticket recorded")
	}
	if !e.closeNothing {
		e.api.close(req.Created["ticket"])
	}
	return sdk.Done("closed"), nil
}

// failures runs f against a TB that records failures instead of failing the test.
func failures(t *testing.T, f func(tb testing.TB)) []string {
	rec := &recordingTB{TB: t}
	f(rec)
	return rec.errors
}

type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Failed() bool { return len(r.errors) > 0 }

func TestLifecycleAndCrashReplay(t *testing.T) {
	tests := []struct {
		name      string
		dedupe    bool
		exec      func(api *tickets) ticketExecutor
		lifecycle string // the failure Lifecycle reports, "" for none
		replay    string // the failure CrashReplay reports, "" for none
	}{
		{
			name: "a ticket recorded, closed in Delete, opened once per key", dedupe: true,
			exec: func(api *tickets) ticketExecutor { return ticketExecutor{api: api} },
		},
		{
			name: "the ID kept in State only", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, forget: true} },
			lifecycle: "created nothing its teardown can find", replay: "no ticket recorded",
		},
		{
			name: "a teardown that leaves the ticket open", dedupe: true,
			exec:      func(api *tickets) ticketExecutor { return ticketExecutor{api: api, closeNothing: true} },
			lifecycle: "still exists", replay: "still exists",
		},
		{
			name:   "a remote API that ignores the idempotency key",
			exec:   func(api *tickets) ticketExecutor { return ticketExecutor{api: api} },
			replay: "made 2 things, not 1",
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
				{"CrashReplay", tt.replay, func(tb testing.TB, r Runner, remote Remote) {
					CrashReplay(tb, r, "test.ticket", nil, remote)
				}},
			} {
				api := newTickets(tt.dedupe)
				r := InProcess(t, tt.exec(api))
				got := failures(t, func(tb testing.TB) { check.run(tb, r, api.remote()) })
				if check.want == "" {
					assert.Empty(t, got, check.name)
					continue
				}
				assert.True(t, strings.Contains(strings.Join(got, "\n"), check.want), "%s reports %q: %v", check.name, check.want, got)
			}
		})
	}
}
