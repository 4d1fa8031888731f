package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// fakeAPI is the ticket API of the plugin's doc comment (api.go), in memory on loopback.
// An open ticket becomes verdict after approveAfter GETs.
type fakeAPI struct {
	url   string
	token string // the bearer token every call needs; "" for none

	mu           sync.Mutex
	tickets      map[string]*fakeTicket
	byKey        map[string]string // the ticket each idempotency key opened
	ignoreKey    bool              // open a new ticket on every POST, as a careless API would
	approveAfter int
	verdict      string // what an open ticket becomes: approved, rejected; "" stays open
	fail         int    // a status every call gets instead, 0 for none
	calls        int
}

type fakeTicket struct {
	status string
	gets   int
}

// newFake starts the fake, wanting token, which approves a ticket at its second GET.
func newFake(t *testing.T, token string) *fakeAPI {
	t.Helper()
	f := &fakeAPI{token: token, tickets: map[string]*fakeTicket{}, byKey: map[string]string{}, approveAfter: 2, verdict: statusApproved}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tickets", f.open)
	mux.HandleFunc("GET /tickets/{id}", f.get)
	mux.HandleFunc("POST /tickets/{id}/close", f.close)
	s := httptest.NewServer(f.guard(mux)) // listens on 127.0.0.1
	t.Cleanup(s.Close)
	f.url = s.URL
	return f
}

// guard counts calls, answers fail when set, and wants the token.
func (f *fakeAPI) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls++
		fail := f.fail
		f.mu.Unlock()
		switch {
		case fail != 0:
			w.WriteHeader(fail)
		case f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token:
			w.WriteHeader(http.StatusUnauthorized)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (f *fakeAPI) open(w http.ResponseWriter, r *http.Request) {
	var body struct{ Summary string }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Summary == "" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	id, seen := f.byKey[key]
	if !seen || key == "" || f.ignoreKey {
		id = fmt.Sprintf("T-%d", len(f.tickets)+1)
		f.tickets[id], f.byKey[key] = &fakeTicket{status: statusOpen}, id
	}
	answer(w, http.StatusCreated, id, f.tickets[id].status)
}

// withTicket calls do with the ticket of the request's path, under f.mu, or answers 404
// Not Found when there is none.
func (f *fakeAPI) withTicket(w http.ResponseWriter, r *http.Request, do func(t *fakeTicket)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tickets[r.PathValue("id")]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	do(t)
}

func (f *fakeAPI) get(w http.ResponseWriter, r *http.Request) {
	f.withTicket(w, r, func(t *fakeTicket) {
		t.gets++
		if t.status == statusOpen && f.verdict != "" && t.gets >= f.approveAfter {
			t.status = f.verdict
		}
		answer(w, http.StatusOK, r.PathValue("id"), t.status)
	})
}

func (f *fakeAPI) close(w http.ResponseWriter, r *http.Request) {
	f.withTicket(w, r, func(t *fakeTicket) {
		t.status = statusClosed
		w.WriteHeader(http.StatusOK)
	})
}

func answer(w http.ResponseWriter, status int, id, ticketStatus string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ticket{ID: id, Status: ticketStatus})
}

// status is a ticket's status, "" for one the fake does not hold.
func (f *fakeAPI) status(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.tickets[id]; ok {
		return t.status
	}
	return ""
}

func (f *fakeAPI) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// set changes the fake under its lock.
func (f *fakeAPI) set(change func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

// remote is the fake as Lifecycle and CrashReplay see it: a ticket exists until closed.
func (f *fakeAPI) remote() plugintest.Remote {
	return plugintest.Remote{
		Exists: func(_ context.Context, created map[string]string) (bool, error) {
			s := f.status(created["ticket"])
			return s != "" && s != statusClosed, nil
		},
		Count: func(context.Context) (int, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.tickets), nil
		},
	}
}
