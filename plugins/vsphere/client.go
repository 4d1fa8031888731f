package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/time/rate"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

const (
	// dialTimeout bounds connecting to vCenter when the hook's deadline is further away.
	dialTimeout = 30 * time.Second
	// logoutTimeout bounds the logout that ends every hook, even a cancelled one.
	logoutTimeout = 10 * time.Second
)

// vcenter is a session with vCenter that lasts one hook. The plugin keeps no session
// between hooks: a rotated password takes effect at the next call, and nothing is left
// to expire or to share between pipelines whose Secrets differ.
type vcenter struct {
	client  *vim25.Client
	session *session.Manager
}

// login connects to vCenter and logs in. Every connection goes only where policy allows
// (the url is the Secret's, so a pipeline's author chooses it). Every request, the login
// included, waits for a token of limiter, which all the hooks of the plugin share. secret
// names the credentials Secret in messages.
func login(ctx context.Context, creds credentials, policy *egress.Policy, limiter *rate.Limiter, secret string) (*vcenter, error) {
	sc := soap.NewClient(creds.url, creds.insecure)
	// The client's own transport is changed in place, not replaced: govmomi hands it to
	// the service clients it makes, which must be held to the policy too.
	t := sc.DefaultTransport()
	if creds.roots != nil {
		t.TLSClientConfig.RootCAs = creds.roots
	}
	dialer := policy.Dialer()
	dialer.Timeout = dialTimeout
	// Through a proxy the address checked would be the proxy's.
	t.Proxy = nil
	t.DialContext = dialer.DialContext
	// soap.Client dials TLS without the request's context and without the policy; this
	// dialer does both, so that an unreachable vCenter cannot hold a hook past its
	// deadline.
	t.DialTLSContext = (&tls.Dialer{NetDialer: dialer, Config: t.TLSClientConfig}).DialContext
	// soap.Client is an http.Client: its Transport carries every SOAP request.
	sc.Transport = sdk.RateLimitedTransport(t, limiter)

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
	return &vcenter{client: c, session: m}, nil
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
	var sdkErr *sdk.Error
	switch {
	case errors.As(err, &sdkErr), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Already classified (the rate limit), or the hook's own deadline (reason Timeout).
		return wrapped
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
