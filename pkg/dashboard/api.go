package dashboard

import (
	"cmp"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The read API. Every list comes from the informer caches: a page view costs the API
// server nothing. Every string from the cluster goes out JSON-encoded; the page escapes it
// when it renders it.

// resourceAccess says whether the user may list a resource; if not, Error is the API
// server's refusal.
type resourceAccess struct {
	Allowed bool   `json:"allowed"`
	Error   string `json:"error,omitempty"`
}

// getInfo is GET /api/info: the dashboard's namespace ("" for all) and what the user may
// list, so that the page can say so rather than show an empty tab.
func (s *Server) getInfo(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, nil) {
		return
	}
	access := func(res *resource) resourceAccess {
		return resourceAccess{Allowed: res.forbidden == "", Error: res.forbidden}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"namespace": s.cfg.Namespace,
		"resources": map[string]resourceAccess{
			"pipelines":      access(&s.caches.pipelines),
			"templates":      access(&s.caches.templates),
			"triggers":       access(&s.caches.triggers),
			"pipelineEvents": access(&s.caches.pipelineEvents),
			"triggerEvents":  access(&s.caches.triggerEvents),
		},
	})
}

// cached waits for the caches and reports whether the handler may read res (nil: any):
// it answers 503 when Run gave up and 403 with the API server's message when the user
// may not list res.
func (s *Server) cached(w http.ResponseWriter, r *http.Request, res *resource) bool {
	if err := s.caches.wait(r.Context()); err != nil {
		if r.Context().Err() == nil { // else the client is gone: nobody to answer
			writeError(w, http.StatusServiceUnavailable, "the dashboard cannot read from the cluster: "+err.Error())
		}
		return false
	}
	if res != nil && res.forbidden != "" {
		writeError(w, http.StatusForbidden, res.forbidden)
		return false
	}
	return true
}

// inScope answers 404 for a namespace outside the dashboard's (kubectl stepwise
// dashboard -n NS) and reports whether ns is inside.
func (s *Server) inScope(w http.ResponseWriter, ns string) bool {
	if s.cfg.Namespace != "" && ns != s.cfg.Namespace {
		writeError(w, http.StatusNotFound, "namespace "+ns+" is outside this dashboard's namespace "+s.cfg.Namespace)
		return false
	}
	return true
}

func writeCacheError(w http.ResponseWriter, what, ns, name string, err error) {
	if apierrors.IsNotFound(err) {
		writeError(w, http.StatusNotFound, what+" "+ns+"/"+name+" not found")
		return
	}
	writeError(w, http.StatusInternalServerError, "read "+what+" "+ns+"/"+name+" from the cache: "+err.Error())
}

func compareKeys(a, b metav1.Object) int {
	return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
}
