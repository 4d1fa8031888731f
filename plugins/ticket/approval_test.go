package main

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
)

// testToken is the bearer token the fake wants; no answer may carry it.
const testToken = "tok-0123456789abcdef"

// request is the first call of hook for a step against f, the token given as the
// operator gives a Secret that tokenSecret names; extra parameters override.
func request(f *fakeAPI, hook sdk.Hook, extra map[string]string) *sdk.Request {
	params := map[string]string{"url": f.url, "summary": "deploy v2", "tokenSecret": "ticket-token"}
	maps.Copy(params, extra)
	req := plugintest.Request(hook, "uid", params)
	data := map[string][]byte{"token": []byte(testToken)}
	req.Secrets, req.SecretParams = data, map[string]map[string][]byte{"tokenSecret": data}
	return req
}

func TestCreate(t *testing.T) {
	tests := []struct {
		name        string
		change      func(f *fakeAPI)
		params      map[string]string
		wantReason  string // of the error that ends it; "" for done
		wantPerm    bool
		wantText    string // the last message, or the error's text
		wantPolls   int
		wantCreated map[string]string
		wantFirst   string // the first call's message
	}{
		{
			name: "approved at the second look", wantText: "ticket T-1 approved", wantPolls: 3,
			wantCreated: map[string]string{"ticket": "T-1"}, wantFirst: "ticket T-1 opened, waiting for approval",
		},
		{
			name: "rejected", change: func(f *fakeAPI) { f.verdict = statusRejected },
			wantReason: "TicketRejected", wantPerm: true, wantText: "ticket T-1 was rejected", wantPolls: 3,
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "closed by a person", change: func(f *fakeAPI) { f.verdict = statusClosed },
			wantReason: "TicketClosed", wantPerm: true, wantText: "ticket T-1 was closed before it was approved", wantPolls: 3,
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			// Looks at 10, 20 and 30s wait; at 40s it gives up.
			name: "never approved", change: func(f *fakeAPI) { f.verdict = "" }, params: map[string]string{"approvalTimeout": "30s"},
			wantReason: "ApprovalTimeout", wantPerm: true, wantText: "ticket T-1 not approved within 30s", wantPolls: 5,
			wantCreated: map[string]string{"ticket": "T-1"},
		},
		{
			name: "the API fails", change: func(f *fakeAPI) { f.fail = 503 },
			wantReason: "TicketAPIFailed", wantText: "POST {url}/tickets: answered 503 Service Unavailable", wantPolls: 1,
		},
		{
			name: "the API refuses the token", change: func(f *fakeAPI) { f.token = "another" },
			wantReason: "TicketAPIRejected", wantPerm: true, wantText: "POST {url}/tickets: answered 401 Unauthorized", wantPolls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, testToken)
			if tt.change != nil {
				f.set(tt.change)
			}
			var messages []string
			got := plugintest.Drive(t, plugintest.Serve(t, newTestApproval()), executorName, sdk.HookCreate,
				request(f, sdk.HookCreate, tt.params),
				plugintest.OnCall(func(_ int, res sdk.Result, _ error) { messages = append(messages, res.Message) }))
			want := replaceURL(tt.wantText, f)
			if tt.wantReason == "" {
				require.NoError(t, got.Err)
				assert.True(t, got.Result.Done)
				assert.Equal(t, want, got.Result.Message)
				assert.Equal(t, map[string]string{"ticketID": "T-1"}, got.Outputs)
			} else {
				require.Error(t, got.Err)
				assert.Equal(t, tt.wantReason, sdk.OwnReason(got.Err))
				assert.Equal(t, tt.wantPerm, sdk.IsPermanent(got.Err))
				assert.Equal(t, want, got.Err.Error())
			}
			assert.Equal(t, tt.wantPolls, got.Polls)
			assert.Equal(t, tt.wantCreated, got.Created, "recorded on the call that opened it")
			if tt.wantFirst != "" {
				assert.Equal(t, tt.wantFirst, messages[0])
			}
		})
	}
}

// TestApprovalWindowCountsFromStepStarted: a retry restarts HookStarted, not the window.
func TestApprovalWindowCountsFromStepStarted(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name        string
		hookStarted time.Time
		stepStarted time.Time
		wantReason  string // "" for a wait
		wantText    string
	}{
		{
			name: "a retry 31m into the step", hookStarted: now, stepStarted: now.Add(-31 * time.Minute),
			wantReason: "ApprovalTimeout", wantText: "ticket T-1 not approved within 30m0s",
		},
		{
			name: "10m into the step", hookStarted: now, stepStarted: now.Add(-10 * time.Minute),
			wantText: "ticket T-1 open: waited 10m0s of 30m0s for approval",
		},
		{
			name: "no StepStarted: from HookStarted", hookStarted: now.Add(-31 * time.Minute),
			wantReason: "ApprovalTimeout", wantText: "ticket T-1 not approved within 30m0s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, testToken)
			f.set(func(f *fakeAPI) { f.verdict, f.tickets["T-1"] = "", &fakeTicket{status: statusOpen} })
			req := request(f, sdk.HookCreate, nil)
			req.Created = map[string]string{"ticket": "T-1"}
			req.HookStarted, req.StepStarted = tt.hookStarted, tt.stepStarted
			res, err := plugintest.Serve(t, newTestApproval()).Run(t.Context(), executorName, sdk.HookCreate, req)
			if tt.wantReason == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.wantText, res.Message)
				assert.Equal(t, 10*time.Second, res.RequeueAfter)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.wantReason, sdk.OwnReason(err))
			assert.True(t, sdk.IsPermanent(err))
			assert.Equal(t, tt.wantText, err.Error())
		})
	}
}

func TestCreateRefusesBadParameters(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		secret map[string][]byte
		want   string
	}{
		{name: "an empty summary, refused by the SDK", params: map[string]string{"summary": ""}, want: `parameter "summary" is required`},
		{name: "a blank summary", params: map[string]string{"summary": " \t"}, want: `parameter "summary" is blank`},
		{name: "a url that is not http", params: map[string]string{"url": "ftp://example.com"}, want: `parameter "url" is not an absolute http or https URL`},
		{name: "a Secret without a token", secret: map[string][]byte{"password": []byte("x")}, want: `the Secret that parameter "tokenSecret" names has no key token`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, testToken)
			req := request(f, sdk.HookCreate, tt.params)
			if tt.secret != nil {
				req.Secrets, req.SecretParams = tt.secret, map[string]map[string][]byte{"tokenSecret": tt.secret}
			}
			_, err := plugintest.Serve(t, newTestApproval()).Run(t.Context(), executorName, sdk.HookCreate, req)
			require.Error(t, err)
			assert.Equal(t, sdk.ReasonInvalidParameter, sdk.OwnReason(err))
			assert.True(t, sdk.IsPermanent(err))
			assert.Equal(t, tt.want, err.Error())
			assert.Zero(t, f.callCount(), "no ticket opened")
		})
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name       string
		created    map[string]string
		status     string // of T-1 in the fake; "" for none
		fail       int
		wantReason string
		wantText   string
		wantCalls  int
	}{
		{name: "nothing recorded", wantText: "no ticket was opened"},
		{name: "an open ticket", created: map[string]string{"ticket": "T-1"}, status: statusOpen, wantText: "ticket T-1 closed", wantCalls: 1},
		{name: "a closed ticket", created: map[string]string{"ticket": "T-1"}, status: statusClosed, wantText: "ticket T-1 closed", wantCalls: 1},
		{name: "a ticket the API does not know", created: map[string]string{"ticket": "T-1"}, wantText: "ticket T-1 is gone", wantCalls: 1},
		{
			name: "the API fails", created: map[string]string{"ticket": "T-1"}, status: statusOpen, fail: 502,
			wantReason: "TicketAPIFailed", wantText: "POST {url}/tickets/T-1/close: answered 502 Bad Gateway", wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, testToken)
			f.set(func(f *fakeAPI) {
				f.fail = tt.fail
				if tt.status != "" {
					f.tickets["T-1"] = &fakeTicket{status: tt.status}
				}
			})
			req := request(f, sdk.HookDelete, nil)
			req.Created = tt.created
			res, err := plugintest.Serve(t, newTestApproval()).Run(t.Context(), executorName, sdk.HookDelete, req)
			assert.Equal(t, tt.wantCalls, f.callCount())
			if tt.wantReason != "" {
				require.Error(t, err)
				assert.Equal(t, tt.wantReason, sdk.OwnReason(err))
				assert.False(t, sdk.IsPermanent(err))
				assert.Equal(t, replaceURL(tt.wantText, f), err.Error())
				return
			}
			require.NoError(t, err)
			assert.True(t, res.Done)
			assert.Equal(t, tt.wantText, res.Message)
			if tt.status != "" {
				assert.Equal(t, statusClosed, f.status("T-1"))
			}
		})
	}
}

func TestDeclarations(t *testing.T) {
	plugintest.AssertDeclarations(t, approval{}.Describe(), map[string]string{
		"url": "https://tickets.example.com", "tokenSecret": "ticket-token", "summary": "deploy v2",
		"approvalTimeout": "1h", "interval": "1m",
	})
}

// replaceURL is text with {url} replaced by the fake's URL.
func replaceURL(text string, f *fakeAPI) string { return strings.ReplaceAll(text, "{url}", f.url) }
