package sdkhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// Error maps the error of a call that got no answer (net/http's *url.Error) to a hook's
// error whose text names no URL, e.g. "POST: could not connect (refused, unreachable or
// timed out)":
//
//   - an address the egress policy refuses: its permanent EndpointNotAllowed, naming the
//     address only;
//   - an error that already says what it is (a *contract.Error, e.g. the client-side rate
//     limit's): its reason and permanence, kept;
//   - a cancelled context: an error wrapping context.Canceled;
//   - anything else: a retryable Unreachable error saying whether the host name did not
//     resolve, the TLS certificate is not trusted (with the x509 verdict), the server does
//     not speak TLS, did not answer in time, or the connection failed, not the operating
//     system's words: a refused, an unreachable and a filtered port read alike.
//
// The result wraps err (errors.Is and errors.As see what it holds), but its text is its
// own. A hook that tells its own deadline from the client's timeout checks ctx.Err() first.
func Error(err error) error {
	return Outcomes{}.Error(err)
}

// Error is the package's Error with o's reasons and names.
func (o Outcomes) Error(err error) error {
	if err == nil {
		return nil
	}
	prefix := ""
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		prefix = o.name(urlErr.Op, urlErr.URL) + ": "
	}
	if refused := egress.AsPermanent(err); refused != nil {
		return fmt.Errorf("%s%w", prefix, refused)
	}
	var own *contract.Error
	if errors.As(err, &own) {
		return &noURLError{text: prefix + own.Error(), err: own}
	}
	if errors.Is(err, context.Canceled) {
		return &noURLError{text: prefix + "cancelled before an answer", err: context.Canceled}
	}
	return contract.Retryable(o.reason(Unreachable), &noURLError{text: prefix + unreachable(err), err: err})
}

// noURLError has its own text, and wraps err for errors.Is and errors.As.
type noURLError struct {
	text string
	err  error
}

func (e *noURLError) Error() string { return e.text }
func (e *noURLError) Unwrap() error { return e.err }

// httpToHTTPS is net/http's error (its own text, no type) for a plain HTTP answer to an
// https call, in place of tls.RecordHeaderError.
const httpToHTTPS = "server gave HTTP response to HTTPS client"

// unreachable says why a call got no answer, in the SDK's words rather than the operating
// system's: "connection refused", "no route to host" and "i/o timeout" tell an open port
// from a closed or a filtered one. What a server's owner needs to fix, a certificate, is
// said as it is.
func unreachable(err error) string {
	var (
		dnsErr      *net.DNSError
		opErr       *net.OpError
		certErr     *tls.CertificateVerificationError
		authority   x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalid     x509.CertificateInvalidError
		recordErr   tls.RecordHeaderError
		netErr      net.Error
		isTimeout   = errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
		isDialError = errors.As(err, &opErr) && opErr.Op == "dial"
	)
	switch {
	case errors.As(err, &dnsErr):
		return "the host name does not resolve"
	case isDialError:
		return "could not connect (refused, unreachable or timed out)"
	case errors.As(err, &certErr), errors.As(err, &authority), errors.As(err, &hostname), errors.As(err, &invalid):
		return "the server's TLS certificate is not trusted: " + certErrorText(err)
	case errors.As(err, &recordErr), strings.Contains(err.Error(), httpToHTTPS):
		return "the server does not speak TLS (use an http URL, or https on a TLS port)"
	case isTimeout:
		return "the server did not answer in time"
	default:
		return "the connection failed before an answer"
	}
}

// certErrorText is the x509 verdict of a certificate error (e.g. "x509: certificate
// signed by unknown authority"), without the wrapping of net/http that quotes the URL.
func certErrorText(err error) string {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) && certErr.Err != nil {
		return certErr.Err.Error()
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		err = e
	}
	return err.Error()
}
