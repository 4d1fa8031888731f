package sdkhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// What a wait lasts when the server does not say (DefaultPollInterval), and the bounds of
// what it says in Retry-After: not a busy loop, and not longer than a step's attempt is
// likely to last.
const (
	DefaultPollInterval = 10 * time.Second
	MinRetryAfter       = time.Second
	MaxRetryAfter       = 10 * time.Minute
)

// The reasons of the errors, after Outcomes.ReasonPrefix: HTTPRejected, WebhookRejected...
const (
	// Rejected: another 4xx, permanent (the same call gets the same answer).
	Rejected = "Rejected"
	// Throttled: a 429 without Retry-After, retryable with the engine's backoff.
	Throttled = "Throttled"
	// Failed: a 5xx, retryable.
	Failed = "Failed"
	// Redirected: a 3xx, permanent (a client of a plugin follows no redirect: a POST would
	// become a GET, and a signed call should reach only the configured URL).
	Redirected = "Redirected"
	// Unreachable: no answer (DNS, connection, TLS, timeout), retryable.
	Unreachable = "Unreachable"
	// Unexpected: a status outside 2xx-5xx, retryable.
	Unexpected = "Unexpected"
)

// Outcomes maps answers and transport errors to outcomes; its zero value is the package's
// (reasons HTTPRejected..., requests named by their method).
type Outcomes struct {
	// ReasonPrefix starts every reason: "HTTP" when empty. A plugin may give its own, as
	// webhook.call gives "Webhook" (WebhookRejected, WebhookUnreachable...).
	ReasonPrefix string
	// Name names a request in messages from its method and URL; nil names it by its method
	// alone ("POST"). It must not return the URL's user info or query, which may hold
	// credentials: use egress.RedactURL.
	Name func(method, url string) string
}

// Result maps an answer to a hook's outcome, reading neither its body nor its reason
// phrase (the caller closes the body):
//
//   - 2xx but 202: done, with message done ("answered 200 OK" when empty);
//   - 202 Accepted: waiting, called again after Retry-After (seconds or an HTTP date,
//     clamped to [MinRetryAfter, MaxRetryAfter]), else after DefaultPollInterval;
//   - 429 Too Many Requests: waiting as long as Retry-After says; without one, a retryable
//     Throttled error (the engine's backoff);
//   - 3xx: a permanent Redirected error; other 4xx: a permanent Rejected error;
//   - 5xx: a retryable Failed error; anything else a retryable Unexpected error.
func Result(resp *http.Response, done string) (contract.Result, error) {
	return Outcomes{}.Result(resp, done)
}

// Result is the package's Result with o's reasons and names.
func (o Outcomes) Result(resp *http.Response, done string) (contract.Result, error) {
	return o.result(resp, done, time.Now())
}

func (o Outcomes) result(resp *http.Response, done string, now time.Time) (contract.Result, error) {
	status := resp.StatusCode
	answered := "answered " + StatusText(status)
	if name := o.requestName(resp.Request); name != "" {
		answered = name + ": " + answered
	}
	retry, hasRetry := RetryAfter(resp.Header.Get("Retry-After"), now)
	switch {
	case status == http.StatusAccepted:
		if !hasRetry {
			retry = DefaultPollInterval
		}
		return contract.Wait(retry, fmt.Sprintf("accepted (%s), in progress: calling again in %s", StatusText(status), retry)), nil
	case status >= 200 && status < 300:
		if done == "" {
			done = "answered " + StatusText(status)
		}
		return contract.Done(done), nil
	case status == http.StatusTooManyRequests && hasRetry:
		// Honour the server's pace exactly; the step's timeout still bounds the wait.
		return contract.Wait(retry, fmt.Sprintf("throttled (%s): calling again in %s", StatusText(status), retry)), nil
	case status == http.StatusTooManyRequests:
		return contract.Result{}, contract.Retryable(o.reason(Throttled), errors.New(answered))
	case status >= 300 && status < 400:
		return contract.Result{}, contract.Permanent(o.reason(Redirected), fmt.Errorf("%s; redirects are not followed", answered))
	case status >= 400 && status < 500:
		return contract.Result{}, contract.Permanent(o.reason(Rejected), errors.New(answered))
	case status >= 500 && status < 600:
		return contract.Result{}, contract.Retryable(o.reason(Failed), errors.New(answered))
	default:
		return contract.Result{}, contract.Retryable(o.reason(Unexpected), errors.New(answered))
	}
}

// StatusText names an HTTP status by its code and Go's text for it ("500 Internal Server
// Error"), never by the answer's reason phrase.
func StatusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("%d %s", code, text)
	}
	return strconv.Itoa(code)
}

// RetryAfter reads a Retry-After header, seconds or an HTTP date, clamped to
// [MinRetryAfter, MaxRetryAfter]; false when there is none, or it is neither.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, MinRetryAfter), MaxRetryAfter), true
}

// reason is the reason of the kind of outcome what.
func (o Outcomes) reason(what string) string {
	if o.ReasonPrefix == "" {
		return "HTTP" + what
	}
	return o.ReasonPrefix + what
}

// requestName names req in messages; empty without a request.
func (o Outcomes) requestName(req *http.Request) string {
	if req == nil {
		return ""
	}
	url := ""
	if req.URL != nil {
		url = req.URL.String()
	}
	return o.name(req.Method, url)
}

func (o Outcomes) name(method, url string) string {
	if method == "" {
		method = http.MethodGet // net/http's meaning of an empty method
	}
	if o.Name == nil {
		return strings.ToUpper(method)
	}
	return o.Name(strings.ToUpper(method), url)
}
