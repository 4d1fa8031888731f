package main

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCloud is an in-test stand-in for the part of Keystone v3 and Nova that the plugin
// uses: POST /v3/auth/tokens (password and application-credential methods, a catalog with
// one compute endpoint) and GET/DELETE /compute/v2.1/servers/{id}. It is not OpenStack:
// it answers as the API reference says those calls answer.
type fakeCloud struct {
	*httptest.Server
	password string

	mu      sync.Mutex
	servers map[string]*fakeServer
	// novaStatus, when non-zero, is the status every Nova request answers with.
	novaStatus int
	// calls counts requests by "METHOD /path-pattern".
	calls map[string]int
	// bodies are the request bodies Keystone received (to check what was sent).
	bodies []string
	// requests are all the requests received, "METHOD /path", those no route serves too.
	requests []string
}

type fakeServer struct {
	// name is the server's name; metadata its metadata (hostname, say), nil for none.
	name       string
	metadata   map[string]string
	status     string
	powerState int
	// deletePolls is how many GETs after a DELETE still show the server (task_state
	// deleting) before Nova answers 404, as a real deletion takes a while.
	deletePolls int
	deleting    bool
}

const fakeToken = "gAAAAAfake-token"

func newFakeCloud(t *testing.T, password string) *fakeCloud {
	t.Helper()
	f := &fakeCloud{password: password, servers: map[string]*fakeServer{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", f.token)
	mux.HandleFunc("GET /compute/v2.1/servers/{id}", f.server("GET /servers/{id}", f.getServer))
	mux.HandleFunc("DELETE /compute/v2.1/servers/{id}", f.server("DELETE /servers/{id}", f.deleteServer))
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	})) // listens on 127.0.0.1
	t.Cleanup(f.Close)
	return f
}

func (f *fakeCloud) authURL() string { return f.URL + "/v3" }

// addServer adds a server named nodeName, the node of the tests' steps.
func (f *fakeCloud) addServer(id, status string, powerState, deletePolls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers[id] = &fakeServer{name: nodeName, status: status, powerState: powerState, deletePolls: deletePolls}
}

func (f *fakeCloud) setNovaStatus(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.novaStatus = code
}

func (f *fakeCloud) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

// deleting tells whether the server is there, being deleted.
func (f *fakeCloud) deleting(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[id]
	return ok && s.deleting
}

func (f *fakeCloud) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fakeCloud) keystoneBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeCloud) token(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Auth struct {
			Identity struct {
				Methods  []string `json:"methods"`
				Password struct {
					User struct {
						Name     string `json:"name"`
						Password string `json:"password"`
					} `json:"user"`
				} `json:"password"`
				ApplicationCredential struct {
					ID     string `json:"id"`
					Secret string `json:"secret"`
				} `json:"application_credential"`
			} `json:"identity"`
		} `json:"auth"`
	}
	raw := new(strings.Builder)
	err := json.NewDecoder(io.TeeReader(r.Body, raw)).Decode(&body)
	f.mu.Lock()
	f.calls["POST /v3/auth/tokens"]++
	f.bodies = append(f.bodies, raw.String())
	f.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": 400, "message": "malformed request"}})
		return
	}
	id := body.Auth.Identity
	ok := (len(id.Methods) == 1 && id.Methods[0] == "password" && id.Password.User.Password == f.password) ||
		(len(id.Methods) == 1 && id.Methods[0] == "application_credential" && id.ApplicationCredential.Secret == f.password)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}})
		return
	}
	w.Header().Set("X-Subject-Token", fakeToken)
	now := time.Now().UTC()
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    id.Methods,
		"issued_at":  now.Format(time.RFC3339),
		"expires_at": now.Add(time.Hour).Format(time.RFC3339),
		"user":       map[string]any{"id": "u1", "name": "stepwise", "domain": map[string]any{"id": "default", "name": "Default"}},
		"project":    map[string]any{"id": "p1", "name": "ops", "domain": map[string]any{"id": "default", "name": "Default"}},
		"catalog": []any{map[string]any{
			"id": "c1", "type": "compute", "name": "nova",
			"endpoints": []any{map[string]any{
				"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne",
				"url": f.URL + "/compute/v2.1",
			}},
		}},
	}})
}

// nova checks the token and the forced status; it reports whether to go on.
func (f *fakeCloud) nova(w http.ResponseWriter, r *http.Request, call string) bool {
	f.calls[call]++
	if r.Header.Get("X-Auth-Token") != fakeToken {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": 401, "message": "Authentication required"}})
		return false
	}
	if f.novaStatus != 0 {
		writeJSON(w, f.novaStatus, map[string]any{"computeFault": map[string]any{"code": f.novaStatus, "message": "Unexpected API Error."}})
		return false
	}
	return true
}

func notFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusNotFound, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Instance " + id + " could not be found."}})
}

// server is the handler of a Nova request for route that names a server: it answers
// itself when Nova is made to fail or knows no such server, and otherwise calls h with
// the server and its ID, f.mu held.
func (f *fakeCloud) server(route string, h func(w http.ResponseWriter, id string, s *fakeServer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.nova(w, r, route) {
			return
		}
		id := r.PathValue("id")
		s, ok := f.servers[id]
		if !ok {
			notFound(w, id)
			return
		}
		h(w, id, s)
	}
}

func (f *fakeCloud) getServer(w http.ResponseWriter, id string, s *fakeServer) {
	taskState := any(nil)
	if s.deleting {
		if s.deletePolls <= 0 {
			delete(f.servers, id)
			notFound(w, id)
			return
		}
		s.deletePolls--
		taskState = "deleting"
	}
	metadata := map[string]string{} // Nova answers {} for a server without metadata
	maps.Copy(metadata, s.metadata)
	writeJSON(w, http.StatusOK, map[string]any{"server": map[string]any{
		"id": id, "name": s.name, "metadata": metadata, "status": s.status,
		"OS-EXT-STS:power_state": s.powerState, "OS-EXT-STS:task_state": taskState,
		"OS-EXT-STS:vm_state": strings.ToLower(s.status),
	}})
}

func (f *fakeCloud) deleteServer(w http.ResponseWriter, _ string, s *fakeServer) {
	s.deleting = true
	w.WriteHeader(http.StatusNoContent)
}
