package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/stepwise-dev/stepwise/pkg/egress"
)

// MaxResponseBytes bounds the body Query reads. The API client reads a body whole
// before it decodes it; a gate's query selects a few series, and an endpoint that
// answers more (a query of every series, or a hostile server) fails the query instead
// of the operator's memory.
const MaxResponseBytes = 16 << 20

// maxFirst bounds QueryResult.First: it names a series in a status, not a dump of it.
const maxFirst = 256

// NamespaceLabel is the label Scope matches: the namespace of a series, as
// kube-state-metrics, cAdvisor and the Prometheus Operator's relabelling write it.
const NamespaceLabel = "namespace"

// QueryResult is what a query returned.
type QueryResult struct {
	// Series is how many series (vector samples or matrix series; a scalar counts as 1).
	// A string result (a PromQL string literal) is an error: it says nothing about health.
	Series int
	// First names the first series as Prometheus writes it, e.g. ALERTS{alertname="NodeDown", alertstate="firing"}, trimmed to 256 bytes; empty when none.
	// Its label values are the answer's: the caller shows them only of a query that read
	// what the trigger may read (Scope, or a Prometheus an admin set for the namespace).
	First string
}

// Failure is why a query has no result, one of a closed set. Its text is fixed: an
// answer's bytes (a proxy's page, another service's banner, an API error's text) and the
// OS's error text (which tells a closed port from a filtered one) never reach a status,
// an Event or a log through it, so that a gate cannot read back what the operator's
// network holds.
type Failure int

const (
	// FailureURL: the URL is not http(s)://host[:port][/path] without user info.
	FailureURL Failure = iota + 1
	// FailureRefused: the egress policy refused the address connected to.
	FailureRefused
	// FailureConnect: no connection, or it broke before a whole answer (DNS, TCP, TLS).
	FailureConnect
	// FailureTimeout: no whole answer before the context ended.
	FailureTimeout
	// FailureStatus: an HTTP status that is not the API's (QueryError.Code).
	FailureStatus
	// FailureNotPrometheus: an answer that is not a query result of the API.
	FailureNotPrometheus
	// FailureTooLarge: an answer over MaxResponseBytes (or the client's own bound).
	FailureTooLarge
	// FailureBadQuery: the API refused the query (bad_data, status 400).
	FailureBadQuery
	// FailureQueryFailed: another error of the API (execution, status 422, or a type
	// Prometheus has not). Prometheus answers its other errors (a timeout, unavailable)
	// with a status that the API client reads as FailureStatus.
	FailureQueryFailed
)

// failureText is each Failure's text; FailureStatus's takes the code.
var failureText = map[Failure]string{
	FailureURL:           "the Prometheus URL must be http or https with a host, and hold no user or password",
	FailureRefused:       "refused: the address is not allowed",
	FailureConnect:       "could not connect",
	FailureTimeout:       "no answer in time",
	FailureStatus:        "the Prometheus answered %d",
	FailureNotPrometheus: "the answer is not a Prometheus query result",
	FailureTooLarge:      "the answer is larger than the operator reads",
	FailureBadQuery:      "the Prometheus refused the query as malformed",
	FailureQueryFailed:   "the query failed in the Prometheus",
}

// QueryError is a query that failed: which Failure, at which endpoint. Its message is
// "query Prometheus at ENDPOINT: " and the failure's fixed text; the cause it wraps (for
// errors.Is, and for a log at a debug verbosity) is not shown.
type QueryError struct {
	Failure Failure
	// Code is the HTTP status of a FailureStatus.
	Code int
	// Endpoint is the URL as errors may name it: scheme://host/path, no user info or
	// query; empty with FailureURL.
	Endpoint string
	cause    error
}

// Reason is the failure's fixed text alone, for a caller that names the endpoint its own
// way.
func (e *QueryError) Reason() string {
	if e.Failure == FailureStatus {
		return fmt.Sprintf(failureText[FailureStatus], e.Code)
	}
	return failureText[e.Failure]
}

func (e *QueryError) Error() string {
	if e.Endpoint == "" {
		return e.Reason()
	}
	return "query Prometheus at " + e.Endpoint + ": " + e.Reason()
}

// Unwrap is the cause, which may quote the answer or the OS: never show it by default.
func (e *QueryError) Unwrap() error { return e.cause }

// Query runs an instant query against the Prometheus-compatible HTTP API at baseURL
// (its /api/v1/query under baseURL's path) at the time at, or at the server's now when
// at is zero. The gate holds while the query returns no series (Series == 0), as an
// alert rule fires while its expression returns some. It sends query as it is: scoping a
// tenant's query is the caller's (Scope).
//
// client carries the caller's egress policy and credentials and is used as it is, its
// transport wrapped to bound the body (MaxResponseBytes). It is client_golang's API
// client that asks: it POSTs the query as a form, and GETs it when the server answers
// 403, 405 or 501 (a proxy that allows reads only). baseURL must be http or https
// with a host and no user info; its query string is sent (a label proxy's
// ?namespace=...). Every error is a *QueryError. Warnings from the API are ignored: they
// do not change what the query returned.
func Query(ctx context.Context, client *http.Client, baseURL, query string, at time.Time) (QueryResult, error) {
	endpoint, err := CheckURL(baseURL)
	if err != nil {
		return QueryResult{}, err
	}
	if client == nil {
		return QueryResult{}, &QueryError{Failure: FailureConnect, Endpoint: endpoint, cause: errors.New("no HTTP client")}
	}
	answered := &answeredTransport{next: client.Transport}
	bounded := *client
	bounded.Transport = answered
	apiClient, err := promapi.NewClient(promapi.Config{Address: baseURL, Client: &bounded})
	if err != nil {
		return QueryResult{}, &QueryError{Failure: FailureURL, cause: err}
	}
	value, _, err := promv1.NewAPI(apiClient).Query(ctx, query, at)
	if err != nil {
		qerr := classify(ctx, err, answered.code)
		qerr.Endpoint = endpoint
		return QueryResult{}, qerr
	}
	res, ok := resultOf(value)
	if !ok {
		return QueryResult{}, &QueryError{Failure: FailureNotPrometheus, Endpoint: endpoint, cause: fmt.Errorf("a result of type %T", value)}
	}
	return res, nil
}

// CheckURL checks a Prometheus URL and names it as errors may: scheme://host/path. Its
// error, a *QueryError of FailureURL, quotes no part of it, which may hold a password.
func CheckURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	// Not quoted: url.Parse's errors quote the URL, and in "user:password@host", "user"
	// parses as the scheme.
	switch {
	case err != nil:
		return "", &QueryError{Failure: FailureURL, cause: errors.New("it does not parse")}
	case u.User != nil:
		return "", &QueryError{Failure: FailureURL, cause: errors.New("it holds user info")}
	case u.Scheme != "http" && u.Scheme != "https":
		return "", &QueryError{Failure: FailureURL, cause: errors.New("it is not http or https")}
	case u.Host == "":
		return "", &QueryError{Failure: FailureURL, cause: errors.New("it has no host")}
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), nil
}

// classify tells the Failure of the API client's err; code is the last HTTP status
// answered, 0 when none was.
func classify(ctx context.Context, err error, code int) *QueryError {
	fail := func(f Failure) *QueryError { return &QueryError{Failure: f, Code: code, cause: withoutURL(err)} }
	var (
		refused  *egress.RefusedError
		tooLarge *egress.ResponseTooLargeError
		apiErr   *promv1.Error
		netErr   net.Error
	)
	switch {
	case errors.As(err, &refused):
		return fail(FailureRefused)
	case errors.Is(err, errResponseTooLarge), errors.As(err, &tooLarge):
		return fail(FailureTooLarge)
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fail(FailureTimeout)
	case errors.As(err, &apiErr):
		return fail(apiFailure(apiErr.Type, code))
	case code == 0:
		return fail(FailureConnect)
	}
	// An answer that the client could not decode (a string result, a value of no type).
	return fail(FailureNotPrometheus)
}

// apiFailure is the Failure of an error of the API client of type t (the server's
// errorType, or the client's own), after an answer of status code.
func apiFailure(t promv1.ErrorType, code int) Failure {
	switch t {
	case promv1.ErrServer, promv1.ErrClient:
		return FailureStatus // not the API's status: a proxy's, or not Prometheus
	case promv1.ErrBadResponse:
		if code/100 != 2 {
			return FailureStatus
		}
		return FailureNotPrometheus
	case promv1.ErrBadData:
		return FailureBadQuery
	}
	return FailureQueryFailed
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

// resultOf counts the series of a query's result and names the first; false for a
// result of another type.
func resultOf(value model.Value) (QueryResult, bool) {
	switch v := value.(type) {
	case model.Vector:
		if len(v) == 0 {
			return QueryResult{}, true
		}
		return QueryResult{Series: len(v), First: truncate(v[0].Metric.String(), maxFirst)}, true
	case model.Matrix:
		if len(v) == 0 {
			return QueryResult{}, true
		}
		return QueryResult{Series: len(v), First: truncate(v[0].Metric.String(), maxFirst)}, true
	case *model.Scalar:
		return QueryResult{Series: 1, First: truncate(v.String(), maxFirst)}, true
	}
	return QueryResult{}, false
}

// ScopeError is a query that Scope cannot limit to a namespace: its message says why in
// the words of the query, which are the tenant's own.
type ScopeError struct{ msg string }

func (e *ScopeError) Error() string { return e.msg }

// Scope returns query with the label matcher namespace="<namespace>" on each of its
// selectors (instant, range and in subqueries), as prom-label-proxy enforces a tenant's
// label, so that it reads that namespace's series only. A selector that already matches
// namespace="<namespace>" keeps it; one that matches the label any other way
// (namespace="other", namespace=~".+", namespace!="x") is refused rather than rewritten,
// as is a query that does not parse or uses what cannot be scoped. The query is parsed
// with Prometheus' own parser and written back by it.
func Scope(query, namespace string) (string, error) {
	// The parser's defaults: no experimental functions (info() reads series that no
	// selector names), duration expressions or modifiers.
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		return "", &ScopeError{msg: "the query does not parse: " + truncate(oneLine(err.Error()), maxErrorText)}
	}
	var scopeErr error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if scopeErr != nil {
			return scopeErr
		}
		switch n := node.(type) {
		case nil: // the end of a node's children
		case *parser.VectorSelector:
			scopeErr = scopeSelector(n, namespace)
		case *parser.Call:
			if n.Func == nil || n.Func.Experimental {
				scopeErr = &ScopeError{msg: "the query calls an experimental function, which a gate cannot limit to its namespace"}
			}
		case *parser.MatrixSelector, *parser.SubqueryExpr, *parser.AggregateExpr, *parser.BinaryExpr,
			*parser.ParenExpr, *parser.UnaryExpr, *parser.NumberLiteral, *parser.StringLiteral, parser.Expressions:
			// Their selectors are their children, which Inspect visits.
		default:
			// A node of a newer grammar may read series no selector names.
			scopeErr = &ScopeError{msg: fmt.Sprintf("the query holds a %T, which a gate cannot limit to its namespace", node)}
		}
		return scopeErr
	})
	if scopeErr != nil {
		return "", scopeErr
	}
	return expr.String(), nil
}

// scopeSelector makes vs match namespace="<namespace>" and nothing else of that label.
func scopeSelector(vs *parser.VectorSelector, namespace string) error {
	kept := vs.LabelMatchers[:0]
	for _, m := range vs.LabelMatchers {
		if m.Name != NamespaceLabel {
			kept = append(kept, m)
			continue
		}
		if m.Type != labels.MatchEqual || m.Value != namespace {
			return &ScopeError{msg: fmt.Sprintf("the query selects %s: a gate reads its own namespace's series only "+
				"(%s=%q, which the operator adds to every selector); leave the matcher out", truncate(m.String(), maxFirst), NamespaceLabel, namespace)}
		}
	}
	vs.LabelMatchers = append(kept, labels.MustNewMatcher(labels.MatchEqual, NamespaceLabel, namespace))
	return nil
}

// errResponseTooLarge ends reading a body past MaxResponseBytes.
var errResponseTooLarge = fmt.Errorf("response larger than %d bytes", MaxResponseBytes)

// answeredTransport is the caller's transport (http.DefaultTransport when nil, as for
// http.Client) with each response body bounded to MaxResponseBytes, and the status of the
// last response kept: the API client tells a status only in the text it would quote.
// One Query uses it, one request at a time.
type answeredTransport struct {
	next http.RoundTripper
	code int
}

func (t *answeredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	t.code = resp.StatusCode
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
