package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

const (
	// dialTimeout bounds connecting to vCenter when the hook's deadline is further away.
	dialTimeout = 30 * time.Second
	// requestTimeout bounds one request to vCenter, its answer read whole included, so that
	// a vCenter (or what a tenant's Secret points at) that accepts the connection and never
	// answers costs one retry rather than the whole attempt of the hook: govmomi's client
	// has no such bound.
	requestTimeout = 30 * time.Second
	// logoutTimeout bounds the logout that ends every hook, even a cancelled one.
	logoutTimeout = 10 * time.Second
)

// vcenter is a session with vCenter that lasts one hook. The plugin keeps no session
// between hooks: a rotated password takes effect at the next call, and nothing is left
// to expire or to share between pipelines whose Secrets differ.
type vcenter struct {
	client  *vim25.Client
	session *session.Manager
	// pollSeconds bounds how long vCenter may hold a wait for a task's change, under the
	// bound of one request.
	pollSeconds int32
}

// login connects to vCenter and logs in. Every connection goes only where e's policy
// allows (the url is the Secret's, so a pipeline's author chooses it). Every request, the
// login included, takes a token of the plugin's rate limits (e.limit) or fails, has at
// most e.requestTimeout, and has its answer read up to egress.MaxResponseBytes. secret
// names the credentials Secret in messages.
func (e *terminateVM) login(ctx context.Context, creds credentials, secret string) (*vcenter, error) {
	sc := soap.NewClient(creds.url, creds.insecure)
	// The client's own transport is changed in place, not replaced: govmomi hands it to
	// the service clients it makes, which must be held to the policy too.
	t := sc.DefaultTransport()
	if creds.roots != nil {
		t.TLSClientConfig.RootCAs = creds.roots
	}
	dialer := e.policy.Dialer()
	dialer.Timeout = dialTimeout
	// Through a proxy the address checked would be the proxy's.
	t.Proxy = nil
	t.DialContext = dialer.DialContext
	// soap.Client dials TLS without the request's context and without the policy; this
	// dialer does both, so that an unreachable vCenter cannot hold a hook past its
	// deadline.
	t.DialTLSContext = (&tls.Dialer{NetDialer: dialer, Config: t.TLSClientConfig}).DialContext
	// soap.Client is an http.Client: its Transport carries every SOAP request. The bound
	// is outermost, so that it covers the wait for a token too.
	namespace, _ := sdk.TenantFrom(ctx)
	sc.Transport = boundedTransport{
		next: hookTransport{
			next:      e.limit(egress.LimitResponses(t, egress.MaxResponseBytes)),
			namespace: namespace,
		},
		timeout: e.requestTimeout,
	}

	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		sc.CloseIdleConnections()
		return nil, vsphereError(fmt.Sprintf("connect to vCenter %s", creds.url.Host), err)
	}
	m := session.NewManager(c)
	if err := m.Login(ctx, url.UserPassword(creds.username, creds.password)); err != nil {
		sc.CloseIdleConnections()
		if fault.Is(err, &types.InvalidLogin{}) {
			return nil, sdk.Permanent("InvalidCredentials", fmt.Errorf(
				"vCenter %s refused the login with the username and password of Secret %q: incorrect or disabled account",
				creds.url.Host, secret))
		}
		return nil, vsphereError(fmt.Sprintf("log in to vCenter %s", creds.url.Host), err)
	}
	return &vcenter{client: c, session: m, pollSeconds: int32(max(time.Second, e.requestTimeout/2) / time.Second)}, nil
}

// waitTask waits for task to end, as govmomi's Task.WaitEx does, but in waits that vCenter
// ends after pollSeconds when nothing changed: WaitEx's waits have no end of their own, and
// a task that takes longer than a request may (a power-off, a destroy of large disks)
// would fail it. The error of a failed task is govmomi's task.Error, as WaitEx's.
func (v *vcenter) waitTask(ctx context.Context, t *object.Task) error {
	pc := property.DefaultCollector(v.client)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		filter := &property.WaitFilter{WaitOptions: property.WaitOptions{
			Options:          &types.WaitOptions{MaxWaitSeconds: &v.pollSeconds},
			PropagateMissing: true,
		}}
		// What waitTask reads of the task's info, asked for one by one rather than as
		// "info": vCenter sends only those, and govmomi's simulator, which the tests run,
		// reads a parent property of an object without the object's lock while the task
		// updates it (a data race -race reports in the simulator).
		filter.Add(t.Reference(), t.Reference().Type, []string{"info.state", "info.error", "info.description"})
		var info types.TaskInfo
		err := property.WaitForUpdatesEx(ctx, pc, filter, func(updates []types.ObjectUpdate) bool {
			for _, u := range updates {
				for _, c := range u.ChangeSet {
					setTaskInfo(&info, c)
				}
			}
			return info.State == types.TaskInfoStateSuccess || info.State == types.TaskInfoStateError
		})
		switch {
		case err != nil:
			return err
		case info.State == types.TaskInfoStateSuccess:
			return nil
		case info.State == types.TaskInfoStateError:
			return task.Error{LocalizedMethodFault: info.Error, Description: info.Description}
		default:
			continue // vCenter ended the wait with the task still going
		}
	}
}

// setTaskInfo applies to info one change of waitTask's wait.
func setTaskInfo(info *types.TaskInfo, c types.PropertyChange) {
	switch c.Name {
	case "info.state":
		if s, ok := c.Val.(types.TaskInfoState); ok {
			info.State = s
		}
	case "info.error":
		if f := asPointer[types.LocalizedMethodFault](c.Val); f != nil {
			info.Error = f
		}
	case "info.description":
		if d := asPointer[types.LocalizableMessage](c.Val); d != nil {
			info.Description = d
		}
	}
}

// asPointer is v as a *T, whether the answer's decoder made it a T or a *T; nil otherwise.
func asPointer[T any](v any) *T {
	switch x := v.(type) {
	case T:
		return &x
	case *T:
		return x
	}
	return nil
}

// hookTransport counts every request of a hook's client as the hook's namespace's (for
// the rate limits), those govmomi sends with a context of its own included: the end of a
// task wait uses context.Background.
type hookTransport struct {
	next      http.RoundTripper
	namespace string
}

func (t hookTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := sdk.TenantFrom(req.Context()); !ok && t.namespace != "" {
		req = req.WithContext(sdk.WithTenant(req.Context(), t.namespace))
	}
	return t.next.RoundTrip(req)
}

// boundedTransport gives each request at most timeout, its answer's body read included,
// within the hook's own deadline, and says so when it ends a request.
type boundedTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	ctx, cancel := context.WithTimeout(parent, t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		err = t.why(parent, ctx, err)
		cancel()
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, cancel: cancel, why: func(err error) error { return t.why(parent, ctx, err) }}
	return resp, nil
}

// why is err, or the bound's own error when the bound, not the hook's deadline, ended ctx.
func (t boundedTransport) why(parent, ctx context.Context, err error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || parent.Err() != nil {
		return err
	}
	return sdk.Retryable("VSphereUnavailable", fmt.Errorf("vCenter did not answer within %s, the most one request may take", t.timeout))
}

// boundedBody is the body of a request of boundedTransport, whose bound ends when it is
// closed.
type boundedBody struct {
	io.ReadCloser
	cancel context.CancelFunc
	why    func(error) error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = b.why(err)
	}
	return n, err
}

func (b *boundedBody) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}

// logout ends the session, even when the hook's context is done.
func (v *vcenter) logout(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logoutTimeout)
	defer cancel()
	// A session left behind expires on vCenter's idle timeout: nothing to fail a hook for.
	_ = v.session.Logout(ctx)
	// Each hook has its own transport: let its connections go with it.
	v.client.CloseIdleConnections()
}

// vsphereError wraps err, from a vCenter call made to do what, with whether retrying can
// help: faults that pass (a busy host, a task in progress, a network error) are retryable;
// missing privileges, an untrusted certificate and an address the egress policy refuses
// need a person and are permanent. URLs in err lose their user info and query.
func vsphereError(what string, err error) error {
	if refused := egress.AsPermanent(err); refused != nil {
		return fmt.Errorf("%s: %w", what, refused)
	}
	err = egress.RedactError(err)
	wrapped := fmt.Errorf("%s: %w", what, err)
	var (
		sdkErr   *sdk.Error
		tooLarge *egress.ResponseTooLargeError
	)
	switch {
	case errors.As(err, &sdkErr), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Already classified (the rate limit, the bound of a request), or the hook's own
		// deadline (reason Timeout).
		return wrapped
	case errors.As(err, &tooLarge):
		// The same request gets the same answer.
		return sdk.Permanent("ResponseTooLarge", wrapped)
	case fault.Is(err, &types.NoPermission{}):
		return sdk.Permanent("Forbidden", wrapped)
	case soap.IsCertificateUntrusted(err):
		return sdk.Permanent("UntrustedCertificate", fmt.Errorf(
			"%s: the server's certificate is not trusted (give its CA in key %s of the Secret): %w", what, keyCA, err))
	case isFault(err):
		return sdk.Retryable("VSphereFault", wrapped)
	default:
		return sdk.Retryable("VSphereUnavailable", wrapped)
	}
}

// isFault tells whether err carries a vSphere fault, that is vCenter answered.
func isFault(err error) bool {
	found := false
	fault.In(err, func(types.BaseMethodFault, string, []types.LocalizableMessage) bool {
		found = true
		return true
	})
	return found
}
