package delegatedauth

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Filter lets a request through when its caller is authenticated and authorized.
type Filter struct {
	authn  authenticator.Request
	authz  authorizer.UnconditionalAuthorizer
	logger klog.Logger
}

// NewFilter returns a Filter that asks the API server (client) who a caller is and what it
// may do. A token's identity is cached for 2 minutes, an allow for 5 and a deny for 30
// seconds (the API server's own defaults for delegated components), in caches of bounded
// size, so a scrape every few seconds costs the API server little.
func NewFilter(client kubernetes.Interface, logger klog.Logger) (*Filter, error) {
	// The API server's default backoff for its webhooks (k8s.io/apiserver/pkg/server/options),
	// not imported to keep that package's dependencies out of the operator.
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  client.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 2 * time.Minute,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("make the delegating authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: client.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("make the delegating authorizer: %w", err)
	}
	return newFilter(authn, authz, logger), nil
}

func newFilter(authn authenticator.Request, authz authorizer.UnconditionalAuthorizer, logger klog.Logger) *Filter {
	return &Filter{authn: authn, authz: authz, logger: logger}
}

// Wrap serves next to callers who may use the verb of their request (get for GET and
// HEAD, as the API server maps them) on its path. Others get 401 (no identity) or 403 (not
// allowed) with a fixed text: why a review failed goes to the log, never to the caller.
func (f *Filter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := f.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				f.logger.V(2).Info("Refused an unauthenticated request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{
			User:            resp.User,
			Verb:            verbOf(r.Method),
			Path:            r.URL.Path,
			ResourceRequest: false,
		}
		decision, reason, err := f.authz.Authorize(r.Context(), attrs)
		if err != nil || decision != authorizer.DecisionAllow {
			f.logger.V(2).Info("Refused a request", "path", r.URL.Path, "user", resp.User.GetName(), "reason", reason, "err", err)
			http.Error(w, "Forbidden", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// verbOf is the verb the API server authorizes a non-resource request with.
func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	default:
		return strings.ToLower(method)
	}
}
