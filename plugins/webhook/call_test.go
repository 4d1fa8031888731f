package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/plugintest"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

const hmacKey = "whsec-test-key-0123456789"

// receiver is a webhook receiver as its README asks one to be written: it checks the
// signature (401 if it is wrong) and then answers with respond.
type receiver struct {
	*httptest.Server
	key     string
	respond func(w http.ResponseWriter, call int)

	mu    sync.Mutex
	calls []received
}

type received struct {
	header  http.Header
	body    []byte
	payload payload
}

func newReceiver(t *testing.T, useTLS bool, key string, respond func(w http.ResponseWriter, call int)) *receiver {
	t.Helper()
	rc := &receiver{key: key, respond: respond}
	if useTLS {
		rc.Server = httptest.NewTLSServer(rc) // listens on 127.0.0.1
	} else {
		rc.Server = httptest.NewServer(rc)
	}
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := received{header: r.Header.Clone(), body: body}
	_ = json.Unmarshal(body, &rec.payload)
	rc.mu.Lock()
	rc.calls = append(rc.calls, rec)
	n := len(rc.calls)
	rc.mu.Unlock()

	ts, err := strconv.ParseInt(r.Header.Get(headerTimestamp), 10, 64)
	mac := hmac.New(sha256.New, []byte(rc.key))
	mac.Write([]byte(r.Header.Get(headerTimestamp) + "."))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if r.Method != http.MethodPost || err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute ||
		!hmac.Equal([]byte(want), []byte(r.Header.Get(headerSignature))) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rc.respond(w, n)
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.calls...)
}

// caPEM is the PEM of the TLS receiver's certificate, as a ca.crt Secret key holds it.
func (rc *receiver) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw})
}

// answerV1 answers with a body of the webhook protocol, opting in with headerResult so
// that the plugin reads it.
func answerV1(status int, body string, header ...string) func(http.ResponseWriter, int) {
	return answerJSON(status, body, append([]string{headerResult, resultV1}, header...)...)
}

func answerJSON(status int, body string, header ...string) func(http.ResponseWriter, int) {
	return func(w http.ResponseWriter, _ int) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// outcome is what one call is expected to answer.
type outcome struct {
	done      bool
	requeue   time.Duration // for a result that is not done
	reason    string        // an error's reason; empty for a result
	permanent bool
	message   string // contained in the message or error
}

func noWrap(rt http.RoundTripper) http.RoundTripper { return rt }

func TestCall(t *testing.T) {
	tests := []struct {
		name    string
		tls     bool
		key     string // the receiver's key; empty: hmacKey
		respond func(w http.ResponseWriter, call int)
		hook    sdk.Hook // empty: Create
		params  map[string]string
		secrets func(rc *receiver) map[string][]byte // nil: hmacKey (and the CA for TLS)
		want    []outcome
		// wantOutputs are the outputs of the last result.
		wantOutputs map[string]string
		wantCalls   int
	}{
		{
			name:        "2xx is done with the receiver's outputs and message",
			respond:     answerV1(200, `{"outputs": {"instanceID": "vm-42", "previousPowerState": "poweredOn"}, "message": "vm-42 terminated"}`),
			want:        []outcome{{done: true, message: "vm-42 terminated"}},
			wantOutputs: map[string]string{"instanceID": "vm-42", "previousPowerState": "poweredOn"},
			wantCalls:   1,
		},
		{
			name: "2xx without a JSON body is done",
			respond: func(w http.ResponseWriter, _ int) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "OK")
			},
			want:      []outcome{{done: true, message: "webhook answered 200"}},
			wantCalls: 1,
		},
		{
			name:      "a wrong key makes the receiver answer 401: permanent",
			key:       "another-key",
			respond:   answerJSON(200, `{}`),
			want:      []outcome{{reason: "WebhookRejected", permanent: true, message: "401"}},
			wantCalls: 1,
		},
		{
			name: "202 with Retry-After is looked at again after it, then done",
			respond: func(w http.ResponseWriter, call int) {
				if call == 1 {
					answerV1(202, `{"outputs": {"operation": "op-7"}, "message": "shutting down"}`, "Retry-After", "7")(w, call)
					return
				}
				answerV1(200, `{"outputs": {"instanceID": "vm-42"}}`)(w, call)
			},
			want:        []outcome{{requeue: 7 * time.Second, message: "shutting down"}, {done: true}},
			wantOutputs: map[string]string{"operation": "op-7", "instanceID": "vm-42"},
			wantCalls:   2,
		},
		{
			name:      "202 without Retry-After is looked at again after the default",
			respond:   answerJSON(202, ``),
			want:      []outcome{{requeue: sdkhttp.DefaultPollInterval, message: "in progress"}},
			wantCalls: 1,
		},
		{
			name:      "429 with Retry-After waits that long",
			respond:   answerJSON(429, `{"error": "slow down"}`, "Retry-After", "30"),
			want:      []outcome{{requeue: 30 * time.Second, message: "429"}},
			wantCalls: 1,
		},
		{
			name:      "429 without Retry-After is retryable",
			respond:   answerJSON(429, `{"error": "slow down"}`),
			want:      []outcome{{reason: "WebhookThrottled", message: "429 Too Many Requests"}},
			wantCalls: 1,
		},
		{
			name:      "4xx is permanent, with the status only (the body is not reflected)",
			respond:   answerJSON(422, `{"error": "no such machine `+strings.Repeat("x", 10000)+`"}`),
			want:      []outcome{{reason: "WebhookRejected", permanent: true, message: "answered 422 Unprocessable Entity"}},
			wantCalls: 1,
		},
		{
			name:      "5xx is retryable",
			respond:   answerJSON(503, `{"error": "maintenance"}`),
			want:      []outcome{{reason: "WebhookFailed", message: "503"}},
			wantCalls: 1,
		},
		{
			name: "a redirect is not followed: permanent",
			respond: func(w http.ResponseWriter, _ int) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(http.StatusTemporaryRedirect)
			},
			want:      []outcome{{reason: "WebhookRedirected", permanent: true, message: "/elsewhere"}},
			wantCalls: 1,
		},
		{
			name:      "a malformed JSON answer is permanent",
			respond:   answerV1(200, `{"outputs": ["not", "a", "map"]}`),
			want:      []outcome{{reason: "InvalidWebhookResponse", permanent: true}},
			wantCalls: 1,
		},
		{
			name:      "too many outputs are permanent",
			respond:   answerV1(200, `{"outputs": {`+manyOutputs(maxOutputs+1)+`}}`),
			want:      []outcome{{reason: "InvalidWebhookResponse", permanent: true, message: "at most"}},
			wantCalls: 1,
		},
		{
			name:        "TLS with the CA bundle of the Secret",
			tls:         true,
			respond:     answerV1(200, `{"outputs": {"instanceID": "vm-42"}}`),
			want:        []outcome{{done: true}},
			wantOutputs: map[string]string{"instanceID": "vm-42"},
			wantCalls:   1,
		},
		{
			name:      "TLS without the CA is retryable (unknown authority)",
			tls:       true,
			respond:   answerJSON(200, `{}`),
			secrets:   func(*receiver) map[string][]byte { return map[string][]byte{keyHMAC: []byte(hmacKey)} },
			want:      []outcome{{reason: "WebhookUnreachable", message: "certificate"}},
			wantCalls: 0,
		},
		{
			name:    "a CA bundle that is not PEM is permanent",
			tls:     true,
			respond: answerJSON(200, `{}`),
			secrets: func(*receiver) map[string][]byte {
				return map[string][]byte{keyHMAC: []byte(hmacKey), keyCA: []byte("not a certificate")}
			},
			want: []outcome{{reason: "InvalidCABundle", permanent: true}},
		},
		{
			name:    "a Secret without hmacKey is permanent",
			respond: answerJSON(200, `{}`),
			secrets: func(*receiver) map[string][]byte { return map[string][]byte{"other": []byte("x")} },
			want:    []outcome{{reason: "MissingCredentials", permanent: true, message: keyHMAC}},
		},
		{
			name:    "a url that is not http(s) is permanent",
			respond: answerJSON(200, `{}`),
			params:  map[string]string{"url": "ftp://127.0.0.1/hook", "credentialsSecret": "hook-creds"},
			want:    []outcome{{reason: "InvalidParameter", permanent: true}},
		},
		{
			name:    "an unreachable receiver is retryable",
			respond: answerJSON(200, `{}`),
			params: func() map[string]string {
				closed := httptest.NewServer(http.NotFoundHandler())
				closed.Close()
				return map[string]string{"url": closed.URL + "/hook", "credentialsSecret": "hook-creds"}
			}(),
			want: []outcome{{reason: "WebhookUnreachable"}},
		},
		{
			name:      "Delete does not call by default",
			hook:      sdk.HookDelete,
			respond:   answerJSON(500, `{}`),
			want:      []outcome{{done: true}},
			wantCalls: 0,
		},
		{
			name:      "Delete calls with onDelete true",
			hook:      sdk.HookDelete,
			params:    map[string]string{"onDelete": "true"},
			respond:   answerJSON(204, ``),
			want:      []outcome{{done: true}},
			wantCalls: 1,
		},
		{
			name:    "an onDelete that is not a boolean is permanent",
			params:  map[string]string{"onDelete": "sometimes"},
			respond: answerJSON(200, `{}`),
			want:    []outcome{{reason: "InvalidParameter", permanent: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == "" {
				key = hmacKey
			}
			rc := newReceiver(t, tt.tls, key, tt.respond)
			params := map[string]string{"url": rc.URL + "/hooks/terminate?tenant=ops", "credentialsSecret": "hook-creds", "node": "k8s-node-3"}
			if tt.params != nil && tt.params["url"] != "" {
				params = map[string]string{}
			}
			maps.Copy(params, tt.params)
			secrets := map[string][]byte{keyHMAC: []byte(hmacKey)}
			if tt.tls {
				secrets[keyCA] = rc.caPEM()
			}
			if tt.secrets != nil {
				secrets = tt.secrets(rc)
			}
			hook := tt.hook
			if hook == "" {
				hook = sdk.HookCreate
			}
			c := plugintest.Serve(t, newTestCall(loopback))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			var last sdk.Result
			recorded := map[string]string{}
			for i, want := range tt.want {
				req := plugintest.Request(hook, "uid-1", params)
				req.Attempt = int32(i + 1)
				req.Secrets = secrets
				req.Outputs[req.Step] = maps.Clone(recorded)
				res, err := c.Run(ctx, executorName, hook, req)
				if want.reason != "" {
					var e *sdk.Error
					require.ErrorAs(t, err, &e, "call %d", i+1)
					assert.Equal(t, want.reason, e.Reason, "call %d: %v", i+1, err)
					assert.Equal(t, want.permanent, e.Permanent, "call %d: %v", i+1, err)
					assert.Contains(t, err.Error(), want.message, "call %d", i+1)
					assert.LessOrEqual(t, len(err.Error()), 1024, "messages are bounded")
					assert.NotContains(t, err.Error(), hmacKey)
					continue
				}
				require.NoError(t, err, "call %d", i+1)
				assert.Equal(t, want.done, res.Done, "call %d: %+v", i+1, res)
				assert.Equal(t, want.requeue, res.RequeueAfter, "call %d", i+1)
				assert.Contains(t, res.Message, want.message, "call %d", i+1)
				maps.Copy(recorded, res.Outputs) // the engine merges a hook's outputs
				last = res
			}
			if tt.wantOutputs != nil {
				assert.Equal(t, tt.wantOutputs, recorded)
				assert.Subset(t, recorded, last.Outputs)
			}
			calls := rc.received()
			assert.Len(t, calls, tt.wantCalls, "calls the receiver got")
			for i, got := range calls {
				assert.NotContains(t, string(got.body), hmacKey, "the body must not carry the key")
				assert.Equal(t, "uid-1/step/"+string(hook), got.header.Get(headerIdempotencyKey))
				assert.Equal(t, payload{
					Hook:     hook,
					Pipeline: pipelineRef{Namespace: "default", Name: "conformance", UID: "uid-1", Generation: 1},
					Step:     "step", Params: params, Outputs: got.payload.Outputs,
					IdempotencyKey: "uid-1/step/" + string(hook), Attempt: int32(i + 1),
				}, got.payload)
			}
			// An answer's outputs go back to the receiver on the next call.
			if len(calls) == 2 && tt.wantOutputs["operation"] != "" {
				assert.Equal(t, map[string]string{"operation": "op-7"}, calls[1].payload.Outputs)
			}
		})
	}
}

func manyOutputs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"k` + strconv.Itoa(i) + `": "v"`
	}
	return strings.Join(parts, ", ")
}

func TestErrorsNameTheURLWithoutItsQuery(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(400, `bad`))
	c := plugintest.Serve(t, newTestCall(loopback))
	req := plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"url": rc.URL + "/hook?token=abc123", "credentialsSecret": "hook-creds"})
	req.Secrets = map[string][]byte{keyHMAC: []byte(hmacKey)}
	_, err := c.Run(context.Background(), executorName, sdk.HookCreate, req)
	require.Error(t, err)
	assert.Contains(t, err.Error(), rc.URL+"/hook")
	assert.NotContains(t, err.Error(), "abc123")
}

func TestCallsGoThroughTheRateLimit(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(200, `{}`))
	var mu sync.Mutex
	wrapped := 0
	wrap := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			wrapped++
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	}
	c := plugintest.Serve(t, newCall(egress.New(loopback), wrap))
	req := plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"url": rc.URL, "credentialsSecret": "hook-creds"})
	req.Secrets = map[string][]byte{keyHMAC: []byte(hmacKey)}
	_, err := c.Run(context.Background(), executorName, sdk.HookCreate, req)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 1, wrapped)
}

// TestNamespacesRateLimitFailsFast: with the plugin's limits, a namespace that made its
// burst of calls to a receiver fails its next hook at once with RateLimited, before
// anything is sent, while another namespace's hook calls the same receiver.
func TestNamespacesRateLimitFailsFast(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(200, `{}`))
	c := plugintest.Serve(t, newCall(egress.New(loopback), sdk.NewTenantLimiter(limits).Transport))
	run := func(namespace string) (time.Duration, error) {
		req := plugintest.Request(sdk.HookCreate, "uid-1", map[string]string{"url": rc.URL, "credentialsSecret": "hook-creds"})
		req.Pipeline.Namespace = namespace
		req.Secrets = map[string][]byte{keyHMAC: []byte(hmacKey)}
		start := time.Now()
		_, err := c.Run(t.Context(), executorName, sdk.HookCreate, req)
		return time.Since(start), err
	}

	// The bucket refills while the storm goes on: count what passed.
	passed := 0
	took, err := run("team-a")
	for ; err == nil && passed < 3*limits.TenantBurst; took, err = run("team-a") {
		passed++
	}
	var e *sdk.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "RateLimited", e.Reason)
	assert.False(t, e.Permanent)
	assert.Contains(t, e.Error(), `namespace "team-a"`)
	assert.GreaterOrEqual(t, passed, limits.TenantBurst, "a burst passes")
	assert.Less(t, took, time.Second, "no wait for a token")
	assert.Len(t, rc.received(), passed, "the refused call was not sent")

	_, err = run("team-b")
	require.NoError(t, err, "another namespace's hook calls the same receiver")
	assert.Len(t, rc.received(), passed+1)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDescribe(t *testing.T) {
	c := plugintest.Serve(t, newTestCall(loopback))
	infos, err := c.Describe(context.Background())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	required := map[string]bool{}
	for _, p := range infos[0].GetParameters() {
		assert.NotEmpty(t, p.GetDescription(), p.GetName())
		required[p.GetName()] = p.GetRequired()
	}
	assert.Equal(t, map[string]bool{"url": true, "credentialsSecret": true, "onDelete": false}, required)
}

func TestConformance(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(200, `{"outputs": {"instanceID": "vm-42"}}`))
	plugintest.Conformance(t, newTestCall(loopback), map[string]string{"url": rc.URL, "credentialsSecret": "hook-creds"},
		plugintest.WithSecrets(map[string][]byte{keyHMAC: []byte(hmacKey)}))
}

func TestConformanceOnDelete(t *testing.T) {
	rc := newReceiver(t, false, hmacKey, answerJSON(204, ``))
	plugintest.Conformance(t, newTestCall(loopback), map[string]string{"url": rc.URL, "credentialsSecret": "hook-creds", "onDelete": "true"},
		plugintest.WithSecrets(map[string][]byte{keyHMAC: []byte(hmacKey)}))
}

// loopback is where the tests' receivers listen: the policy of most tests allows it.
var loopback = netip.MustParsePrefix("127.0.0.0/8")

// newTestCall is the executor without rate limit, whose policy allows the given prefixes.
func newTestCall(allowed ...netip.Prefix) *call { return newCall(egress.New(allowed...), noWrap) }
