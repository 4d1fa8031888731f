package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

// The ticket API the plugin expects, JSON over HTTP(S), every call with
// "Authorization: Bearer TOKEN" when tokenSecret is set:
//
//	POST {url}/tickets             Idempotency-Key: KEY, {"summary": "..."}
//	                               → 201 {"id": "T-1", "status": "open"}; the same key
//	                                 returns the same ticket
//	GET  {url}/tickets/{id}        → 200 {"id": "T-1", "status": "open|approved|rejected|closed"}
//	POST {url}/tickets/{id}/close  → 200, also for a closed ticket; 404 for one it does not know
type ticket struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// The statuses of a ticket.
const (
	statusOpen     = "open"
	statusApproved = "approved"
	statusRejected = "rejected"
	statusClosed   = "closed"
)

// outcomes names the API's failures TicketAPIRejected, TicketAPIFailed... apart from a
// rejected ticket (TicketRejected), and a request without the URL's user info and query.
func outcomes() sdkhttp.Outcomes {
	return sdkhttp.Outcomes{
		ReasonPrefix: "TicketAPI",
		Name:         func(method, url string) string { return method + " " + egress.RedactURL(url) },
	}
}

// api is the ticket API as one hook call sees it.
type api struct {
	client *http.Client
	base   *url.URL // the url parameter
	token  string   // empty: no Authorization header
}

// open opens a ticket, or finds the one the key already opened.
func (a api) open(ctx context.Context, key, summary string) (ticket, sdk.Result, error) {
	return a.ticket(ctx, http.MethodPost, "tickets", key, map[string]string{"summary": summary})
}

// get reads a ticket.
func (a api) get(ctx context.Context, id string) (ticket, sdk.Result, error) {
	return a.ticket(ctx, http.MethodGet, "tickets/"+url.PathEscape(id), "", nil)
}

// close closes a ticket; one the API does not know is as good as closed.
func (a api) close(ctx context.Context, id string) (sdk.Result, error) {
	resp, err := a.do(ctx, http.MethodPost, "tickets/"+url.PathEscape(id)+"/close", "", nil)
	if err != nil {
		return sdk.Result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNotFound {
		return sdk.Done("ticket " + id + " is gone"), nil
	}
	return outcomes().Result(resp, "ticket "+id+" closed")
}

// ticket makes a call answered by a ticket. Anything but a 2xx is sdkhttp's outcome,
// passed on: an error, or a wait the API asked for (202, 429 with Retry-After).
func (a api) ticket(ctx context.Context, method, path, key string, body any) (ticket, sdk.Result, error) {
	resp, err := a.do(ctx, method, path, key, body)
	if err != nil {
		return ticket{}, sdk.Result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	res, err := outcomes().Result(resp, "")
	if err != nil || !res.Done {
		return ticket{}, res, err
	}
	var t ticket
	// The body is not quoted in the error: it is the server's words, any bytes at all.
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil || t.ID == "" {
		return ticket{}, sdk.Result{}, sdk.Retryable("TicketAPIBadAnswer",
			errors.New(outcomes().Name(method, resp.Request.URL.String())+": the answer is not a ticket"))
	}
	return t, res, nil
}

// do sends one call to path (escaped) under the base URL. A call that got no answer is
// sdkhttp's error, naming the URL without its user info and query.
func (a api) do(ctx context.Context, method, path, key string, body any) (*http.Response, error) {
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body) // a map of strings always encodes
		in = bytes.NewReader(b)
	}
	// The base URL was checked (absolute http or https) before the hook: the request is valid.
	r, _ := http.NewRequestWithContext(ctx, method, a.base.JoinPath(path).String(), in)
	r.Header.Set("Accept", "application/json")
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	if a.token != "" {
		r.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(r)
	if err != nil {
		return nil, outcomes().Error(err)
	}
	return resp, nil
}
