package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// MaxResponseBytes bounds the body Query reads. The API client reads a body whole
// before it decodes it; a gate's query selects a few series, and an endpoint that
// answers more (a query of every series, or a hostile server) fails the query instead
// of the operator's memory.
const MaxResponseBytes = 16 << 20

// maxFirst bounds QueryResult.First: it names a series in a status, not a dump of it.
const maxFirst = 256

// maxDetail bounds how much of a server's non-API answer (a proxy's error page) an error
// quotes.
const maxDetail = 128

// QueryResult is what a query returned.
type QueryResult struct {
	// Series is how many series (vector samples or matrix series; a scalar counts as 1).
	// A string result (a PromQL string literal) is an error: the API client does not
	// decode it, and it says nothing about health.
	Series int
	// First names the first series as Prometheus writes it, e.g. ALERTS{alertname="NodeDown", alertstate="firing"}, trimmed to 256 bytes; empty when none.
	First string
}

// Query runs an instant query against the Prometheus-compatible HTTP API at baseURL
// (its /api/v1/query under baseURL's path) at the time at, or at the server's now when
// at is zero. The gate holds while the query returns no series (Series == 0), as an
// alert rule fires while its expression returns some.
//
// client carries the caller's egress policy and credentials and is used as it is, its
// transport wrapped to bound the body (MaxResponseBytes). It is client_golang's API
// client that asks: it POSTs the query as a form, and GETs it when the server answers
// 403, 405 or 501 (a proxy that allows reads only). baseURL must be http or https
// with a host and no user info; errors name it by scheme, host and path only, so that
// neither credentials nor a query string reach a status. Warnings from the API are
// ignored: they do not change what the query returned.
func Query(ctx context.Context, client *http.Client, baseURL, query string, at time.Time) (QueryResult, error) {
	endpoint, err := parseBaseURL(baseURL)
	if err != nil {
		return QueryResult{}, err
	}
	fail := func(err error) (QueryResult, error) {
		return QueryResult{}, fmt.Errorf("query Prometheus at %s: %w", endpoint, trimmed(err))
	}
	if client == nil {
		return fail(errors.New("no HTTP client"))
	}
	bounded := *client
	bounded.Transport = boundedTransport{next: client.Transport}
	apiClient, err := promapi.NewClient(promapi.Config{Address: baseURL, Client: &bounded})
	if err != nil {
		return fail(fmt.Errorf("make the API client: %w", withoutURL(err)))
	}
	value, _, err := promv1.NewAPI(apiClient).Query(ctx, query, at)
	if err != nil {
		return fail(describe(err))
	}
	res, err := resultOf(value)
	if err != nil {
		return fail(err)
	}
	return res, nil
}

// parseBaseURL checks baseURL and names it as errors may: scheme://host/path. The
// errors quote no part of baseURL, which may hold a password.
func parseBaseURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		// url.Parse's errors quote the URL, or the part of it that does not parse.
		return "", errors.New("the Prometheus URL does not parse")
	}
	if u.User != nil {
		return "", errors.New("the Prometheus URL must not hold a user or password; give credentials through the HTTP client")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Not quoted: in "user:password@host", "user" parses as the scheme.
		return "", errors.New("the Prometheus URL must be http or https")
	}
	if u.Host == "" {
		return "", errors.New("the Prometheus URL has no host")
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), nil
}

// describe is the API client's error told for a status: an HTTP answer that is not
// the API's quotes the start of its body (a proxy's "502 Bad Gateway"), and a failed
// request drops the URL, which Query names as the endpoint instead.
func describe(err error) error {
	var apiErr *promv1.Error
	if errors.As(err, &apiErr) && apiErr.Detail != "" {
		return fmt.Errorf("%w: %s", err, truncate(oneLine(apiErr.Detail), maxDetail))
	}
	return withoutURL(err)
}

// withoutURL unwraps a *url.Error, whose message quotes the whole request URL (with
// baseURL's query string).
func withoutURL(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// resultOf counts the series of a query's result and names the first.
func resultOf(value model.Value) (QueryResult, error) {
	switch v := value.(type) {
	case model.Vector:
		if len(v) == 0 {
			return QueryResult{}, nil
		}
		return QueryResult{Series: len(v), First: truncate(v[0].Metric.String(), maxFirst)}, nil
	case model.Matrix:
		if len(v) == 0 {
			return QueryResult{}, nil
		}
		return QueryResult{Series: len(v), First: truncate(v[0].Metric.String(), maxFirst)}, nil
	case *model.Scalar:
		return QueryResult{Series: 1, First: truncate(v.String(), maxFirst)}, nil
	default:
		return QueryResult{}, fmt.Errorf("unexpected result of type %T", value)
	}
}

// errResponseTooLarge ends reading a body past MaxResponseBytes.
var errResponseTooLarge = fmt.Errorf("response larger than %d bytes", MaxResponseBytes)

// boundedTransport is the caller's transport (http.DefaultTransport when nil, as for
// http.Client) with each response body bounded to MaxResponseBytes.
type boundedTransport struct {
	next http.RoundTripper
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: MaxResponseBytes}
	return resp, nil
}

// boundedBody reads up to left bytes of a body, then fails with errResponseTooLarge.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
