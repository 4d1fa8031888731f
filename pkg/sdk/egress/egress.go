// Package egress is, for plugins, the address policy of the endpoints a tenant names in a
// step (package github.com/stepwise-dev/stepwise/pkg/egress, which the operator uses for
// its health gates): every name here is that package's.
//
//	policy, err := egress.FromEnvironment()
//	client := &http.Client{Transport: policy.Transport(nil)}
//	...
//	if refused := egress.AsPermanent(err); refused != nil { return fmt.Errorf("call %s: %w", egress.RedactURL(raw), refused) }
package egress

import (
	"net/http"
	"net/netip"

	"github.com/stepwise-dev/stepwise/pkg/egress"
)

// EnvAllowedCIDRs is egress.EnvAllowedCIDRs: the CIDRs the operator allows despite the
// policy, as its plugins find them in their environment.
const EnvAllowedCIDRs = egress.EnvAllowedCIDRs

// MaxResponseBytes is egress.MaxResponseBytes: the default bound of a response's body.
const MaxResponseBytes = egress.MaxResponseBytes

// ReasonEndpointNotAllowed is egress.ReasonEndpointNotAllowed: the reason of a step whose
// endpoint the policy refused.
const ReasonEndpointNotAllowed = egress.ReasonEndpointNotAllowed

// Policy decides which addresses a plugin may connect to (egress.Policy).
type Policy = egress.Policy

// RefusedError is a connection the policy refused (egress.RefusedError).
type RefusedError = egress.RefusedError

// ResponseTooLargeError is a response past its bound (egress.ResponseTooLargeError).
type ResponseTooLargeError = egress.ResponseTooLargeError

// New is egress.New: a policy allowing the globally reachable addresses and allowed.
func New(allowed ...netip.Prefix) *Policy { return egress.New(allowed...) }

// Parse is egress.Parse: a policy allowing the comma-separated CIDRs of csv too.
func Parse(csv string) (*Policy, error) { return egress.Parse(csv) }

// FromEnvironment is egress.FromEnvironment: the policy the operator hands its plugins.
func FromEnvironment() (*Policy, error) { return egress.FromEnvironment() }

// Client is egress.Client: an HTTP client under policy, bounded, following no redirect.
func Client(policy *Policy) *http.Client { return egress.Client(policy) }

// LimitResponses is egress.LimitResponses: rt, with each response's body bounded.
func LimitResponses(rt http.RoundTripper, limit int64) http.RoundTripper {
	return egress.LimitResponses(rt, limit)
}

// RedactURL is egress.RedactURL: raw without its user info, query and fragment, which may
// carry credentials.
func RedactURL(raw string) string { return egress.RedactURL(raw) }

// RedactError is egress.RedactError: err with the URLs its text quotes redacted.
func RedactError(err error) error { return egress.RedactError(err) }

// AsPermanent is egress.AsPermanent: for an err that wraps a *RefusedError, the permanent
// error with reason EndpointNotAllowed that a plugin answers for it; nil otherwise.
func AsPermanent(err error) error { return egress.AsPermanent(err) }
