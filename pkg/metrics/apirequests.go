package metrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// APIRequests counts the requests a client makes to the Kubernetes API server, as
// stepwise_api_requests_total{verb,resource,code}. It sees what the client sends, retries
// and watches included, which apiserver_request_total cannot attribute to one client.
type APIRequests struct {
	total *prometheus.CounterVec
}

// NewAPIRequests creates the counter and registers it with reg.
func NewAPIRequests(reg prometheus.Registerer) *APIRequests {
	a := &APIRequests{total: definition(APIRequestsName).counterVec()}
	reg.MustRegister(a.total)
	return a
}

// WrapTransport counts every request sent through rt; its signature fits rest.Config.Wrap.
func (a *APIRequests) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		verb, resource := requestVerbAndResource(req)
		a.total.WithLabelValues(verb, resource, code).Inc()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestVerbAndResource names a request the way the API server's own metrics do, from its
// method and path (/api/v1/namespaces/NS/RESOURCE/NAME/SUBRESOURCE or
// /apis/GROUP/VERSION/...). Paths that name no resource (discovery, /version) keep the
// lower-cased method and an empty resource.
func requestVerbAndResource(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), ""
	}
	// namespaces/NS/RESOURCE/... is namespaced; namespaces[/NAME[/status|finalize]] is the
	// namespace itself, as the API server's RequestInfoFactory decides.
	if len(parts) >= 3 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}

	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case named:
			verb = "get"
		case isWatch(req.URL.Query().Get("watch")):
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

func isWatch(v string) bool {
	w, err := strconv.ParseBool(v)
	return err == nil && w
}
