// Package dashboard serves a read-only web view of Stepwise pipelines, templates and
// triggers, with a few actions on pipelines (retry, suspend, resume, delete, approve or
// reject a step) and triggers (pause, resume), to the one user who started it:
// `kubectl stepwise dashboard`, in the manner of `kubectl proxy`.
//
// It talks to the cluster with that user's credentials, so it shows and does nothing the
// user could not with kubectl, and adds nothing to the cluster: no Service, no RBAC. It
// listens on loopback only, answers only to loopback Host names (no DNS rebinding), and
// asks every API request for a random token that the command prints in the URL it opens.
// Lists come from informer caches, filtered and paginated on the server, and changes reach
// the page over Server-Sent Events.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

const (
	// defaultLimit and maxLimit bound a page of /api/pipelines: a page is what a browser
	// renders at once, never the whole namespace.
	defaultLimit = 100
	maxLimit     = 500
	// coalesceWindow and maxBurst shape the change stream: at most one message per object
	// per window, and one "reload" message for a larger burst (a trigger starting hundreds
	// of pipelines), which the page handles with one fetch rather than hundreds.
	coalesceWindow = 250 * time.Millisecond
	maxBurst       = 100
	// pingInterval keeps the change stream alive through idle periods and lets the server
	// notice a closed tab.
	pingInterval = 15 * time.Second
	// minTokenLength refuses a token short enough to guess.
	minTokenLength = 16
)

// Config is what a Server needs.
type Config struct {
	// Stepwise and Kube act with the user's own credentials (their kubeconfig).
	Stepwise clientset.Interface
	Kube     kubernetes.Interface
	// Namespace limits the dashboard to one namespace; empty means all namespaces.
	Namespace string
	// Token is the secret every API request carries (see NewToken).
	Token string
	// Assets are the web files: index.html at the root, the rest served under /static/.
	// Nil means the files embedded in this package.
	Assets fs.FS
	// OperatorNamespace and CatalogName locate the executor catalogue ConfigMap; empty
	// means catalog.DefaultNamespace and catalog.DefaultName.
	OperatorNamespace, CatalogName string
}

// Server is the dashboard's HTTP server: its handler, and the informers it reads from.
type Server struct {
	cfg    Config
	logger klog.Logger
	token  tokenMatcher
	// page is the value of the cookie that lets a reload of the page in: random, and not
	// the API token, because browsers send a cookie of 127.0.0.1 to every port of it.
	page    string
	pageTok tokenMatcher
	caches  *caches
	hub     *hub
	handler http.Handler
	started atomic.Bool
	// pingEvery spaces the change stream's pings.
	pingEvery time.Duration
}

// New returns a Server for cfg. Nothing talks to the cluster until Run.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Stepwise == nil || cfg.Kube == nil {
		return nil, errors.New("dashboard: the Stepwise and Kubernetes clients are required")
	}
	if len(cfg.Token) < minTokenLength {
		return nil, fmt.Errorf("dashboard: the token must have at least %d characters", minTokenLength)
	}
	if cfg.OperatorNamespace == "" {
		cfg.OperatorNamespace = catalog.DefaultNamespace
	}
	if cfg.CatalogName == "" {
		cfg.CatalogName = catalog.DefaultName
	}
	if cfg.Assets == nil {
		assets, err := embeddedAssets()
		if err != nil {
			return nil, err
		}
		cfg.Assets = assets
	}
	page, err := NewToken()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		logger:  klog.FromContext(ctx).WithName("dashboard"),
		token:   newTokenMatcher(cfg.Token),
		page:    page,
		pageTok: newTokenMatcher(page),
		hub:     newHub(coalesceWindow, maxBurst),

		pingEvery: pingInterval,
	}
	c, err := newCaches(cfg.Stepwise, cfg.Kube, cfg.Namespace, s.hub.publish)
	if err != nil {
		return nil, err
	}
	s.caches = c
	s.handler = s.routes()
	return s, nil
}

// Handler returns the dashboard's HTTP handler. It answers API requests once Run has
// filled the caches; until then they wait.
func (s *Server) Handler() http.Handler { return s.handler }

// Synced is closed once Run has filled the caches (or given up): the moment to print the
// URL or open the browser.
func (s *Server) Synced() <-chan struct{} { return s.caches.ready }

// Run checks which resources the user may list, starts an informer for each of those,
// waits for their caches, and then serves changes until ctx ends, when it stops them. A
// resource the user may not list is marked forbidden (its API answers 403) rather than
// retried forever; any other error (no such resource: is Stepwise installed? expired
// credentials) is returned.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("dashboard: Run was already called")
	}
	// The hub ends with the caches: an error ends both at once.
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, s.logger))
	defer cancel()
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		s.hub.run(ctx)
	}()
	err := s.caches.run(ctx)
	cancel()
	<-hubDone
	return err
}

// Serve serves the dashboard on l until ctx ends, then shuts down, giving requests in
// flight a few seconds. Change streams end with ctx.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: the change stream is one long response.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve dashboard: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down dashboard: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve dashboard: %w", err)
	}
	return nil
}

// ListenLoopback listens on 127.0.0.1:port; port 0 picks a free port (see the listener's
// Addr). Only this machine can connect.
func ListenLoopback(port int) (net.Listener, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("port %d is out of range", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen on 127.0.0.1:%d: %w", port, err)
	}
	return l, nil
}

// NewToken returns a random token: 32 bytes from crypto/rand, base64url without padding,
// safe in a URL as it is.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate dashboard token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// routes builds the handler: every request goes through the security headers and the
// loopback Host check; API routes through the token check, mutations through the Origin
// check as well.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.serveIndex)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.HandlerFunc(s.serveStatic)))

	read := func(h http.HandlerFunc) http.Handler { return s.requireToken(false, h) }
	mux.Handle("GET /api/info", read(s.getInfo))
	mux.Handle("GET /api/pipelines", read(s.listPipelines))
	mux.Handle("GET /api/pipelines/{namespace}/{name}", read(s.getPipeline))
	mux.Handle("GET /api/templates", read(s.listTemplates))
	mux.Handle("GET /api/triggers", read(s.listTriggers))
	mux.Handle("GET /api/triggers/{namespace}/{name}", read(s.getTrigger))
	mux.Handle("GET /api/executors", read(s.listExecutors))
	mux.Handle("GET /api/history", read(s.listHistory))
	// EventSource cannot set headers: the stream takes the token in its query.
	mux.Handle("GET /api/events", s.requireToken(true, http.HandlerFunc(s.streamChanges)))

	write := func(h http.HandlerFunc) http.Handler { return s.requireToken(false, sameOrigin(h)) }
	mux.Handle("POST /api/pipelines/{namespace}/{name}/retry", write(s.retryPipeline))
	mux.Handle("POST /api/pipelines/{namespace}/{name}/suspend", write(s.suspendPipeline(true)))
	mux.Handle("POST /api/pipelines/{namespace}/{name}/resume", write(s.suspendPipeline(false)))
	mux.Handle("DELETE /api/pipelines/{namespace}/{name}", write(s.deletePipeline))
	mux.Handle("POST /api/pipelines/{namespace}/{name}/approve", write(s.decideStep(v1alpha1.ApprovalApprove)))
	mux.Handle("POST /api/pipelines/{namespace}/{name}/reject", write(s.decideStep(v1alpha1.ApprovalReject)))
	mux.Handle("POST /api/triggers/{namespace}/{name}/pause", write(s.pauseTrigger))
	mux.Handle("POST /api/triggers/{namespace}/{name}/resume", write(s.resumeTrigger))

	return securityHeaders(loopbackOnly(mux))
}
