package plugintest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

const (
	cloudName     = "test.cloud"
	cloudParam    = "credentialsSecret"
	cloudPassword = "pw-0123456789"
	cloudWait     = 5 * time.Second
)

// fakeCloud terminates a made-up VM: its Create does what the parameter mode says, with
// the password of the Secret credentialsSecret names.
type fakeCloud struct{ sdk.Base }

func (fakeCloud) Name() string { return cloudName }

func (fakeCloud) Describe() sdk.Description {
	return sdk.Description{Version: "v0.0.1", Parameters: []sdk.Parameter{
		{Name: cloudParam, Type: sdk.ParamSecret, Required: true, Description: "the credentials"},
		{Name: "mode", Type: sdk.ParamString, Description: "what Create does"},
		{Name: "endpoint", Type: sdk.ParamURL, Description: "the cloud's API"},
	}}
}

func (fakeCloud) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	if len(req.Secret(cloudParam)["password"]) == 0 {
		return sdk.Result{}, sdk.Permanent("MissingCredentials", errors.New("no password"))
	}
	endpoint := req.Params["endpoint"]
	switch req.Params["mode"] {
	case "wait":
		// Waits once, then is done: what it did is in its outputs.
		if req.Outputs[req.Step]["asked"] == "" {
			res := sdk.Wait(cloudWait, "terminating")
			res.Outputs = map[string]string{"asked": "yes"}
			return res, nil
		}
		return sdk.DoneWithOutputs("terminated", map[string]string{"done": "yes"}), nil
	case "call":
		httpReq, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return sdk.Result{}, err
		}
		resp, err := egress.Client(egress.New()).Do(httpReq)
		if refused := egress.AsPermanent(err); refused != nil {
			return sdk.Result{}, fmt.Errorf("call %s: %w", egress.RedactURL(endpoint), refused)
		}
		if err != nil {
			return sdk.Result{}, sdk.Retryable("CloudUnreachable", egress.RedactError(err))
		}
		_ = resp.Body.Close()
		return sdk.Done("called"), nil
	case "leak":
		// The endpoint as the step wrote it, its credentials with it.
		return sdk.Result{}, sdk.Retryable("CloudUnreachable", errors.New("no answer from "+endpoint))
	case "gone":
		return sdk.Result{}, sdk.Permanent("Gone", errors.New("the VM is gone"))
	}
	return sdk.Done("nothing to do"), nil
}

// Plan fails with Create's error, or, in mode "plan differs", with another.
func (f fakeCloud) Plan(ctx context.Context, req *sdk.Request) (sdk.Plan, error) {
	if req.Params["mode"] == "plan differs" {
		return sdk.Plan{}, sdk.Permanent("Gone", errors.New("the VM is not there"))
	}
	_, err := f.Create(ctx, req)
	return sdk.Plan{Summary: "terminate the VM"}, err
}

// Delete waits in mode "wait": its work cannot be undone, it has no reason to.
func (fakeCloud) Delete(_ context.Context, req *sdk.Request) (sdk.Result, error) {
	if req.Params["mode"] == "wait" {
		return sdk.Wait(cloudWait, "waiting"), nil
	}
	return sdk.Done("nothing to undo"), nil
}

func cloudSecrets() map[string][]byte { return map[string][]byte{"password": []byte(cloudPassword)} }

// failTB records the failures of the checks it is handed, FailNow ending the goroutine
// they run in (cloudFailures), as the testing package does.
type failTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (f *failTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

func (f *failTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *failTB) FailNow() {
	f.Errorf("FailNow")
	runtime.Goexit()
}

func (f *failTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.failures) > 0
}

// cloudFailures runs check with a TB that records its failures, and returns them.
func cloudFailures(t *testing.T, check func(tb testing.TB)) []string {
	t.Helper()
	tb := &failTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(tb)
	}()
	<-done
	return tb.failures
}

func TestAddSecret(t *testing.T) {
	req := AddSecret(Request(sdk.HookCreate, "uid", nil), "a", map[string][]byte{"k": []byte("1")})
	req = AddSecret(req, "b", map[string][]byte{"l": []byte("2")})
	assert.Equal(t, map[string][]byte{"k": []byte("1"), "l": []byte("2")}, req.Secrets, "merged")
	assert.Equal(t, map[string]map[string][]byte{"a": {"k": []byte("1")}, "b": {"l": []byte("2")}}, req.SecretParams, "by parameter")

	none := AddSecret(Request(sdk.HookCreate, "uid", nil), "a", nil)
	assert.Nil(t, none.Secrets)
	assert.Nil(t, none.SecretParams)
}

func TestCloudCreate(t *testing.T) {
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	assert.Equal(t, cloudName, c.Executor)

	res, err := c.Create(t, map[string]string{cloudParam: "creds"}, cloudSecrets())
	require.NoError(t, err, "the Secret reached the hook by its parameter")
	assert.True(t, res.Done)

	_, err = c.Create(t, map[string]string{cloudParam: "creds"}, nil)
	AssertOutcome(t, Outcome{Reason: "MissingCredentials", Permanent: true}, sdk.Result{}, err)
}

func TestAssertOutcome(t *testing.T) {
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	params := map[string]string{cloudParam: "creds", "mode": "wait"}
	waited, err := c.Create(t, params, cloudSecrets())
	require.NoError(t, err)
	_, gone := c.Create(t, map[string]string{cloudParam: "creds", "mode": "gone"}, cloudSecrets())
	require.Error(t, gone)

	tests := []struct {
		name  string
		want  Outcome
		res   sdk.Result
		err   error
		fails bool
	}{
		{name: "a wait", want: Outcome{RequeueAfter: cloudWait}, res: waited},
		{name: "another wait", want: Outcome{RequeueAfter: time.Second}, res: waited, fails: true},
		{name: "done, not a wait", want: Outcome{Done: true}, res: waited, fails: true},
		{name: "its error", want: Outcome{Reason: "Gone", Permanent: true}, err: gone},
		{name: "retryable, not permanent", want: Outcome{Reason: "Gone"}, err: gone, fails: true},
		{name: "another reason", want: Outcome{Reason: "Lost", Permanent: true}, err: gone, fails: true},
		{name: "an error, not a result", want: Outcome{Done: true}, err: gone, fails: true},
		{name: "a result, not an error", want: Outcome{Reason: "Gone", Permanent: true}, res: waited, fails: true},
		{name: "an error that is no sdk.Error", want: Outcome{Reason: "Gone"}, err: errors.New("gone"), fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := cloudFailures(t, func(tb testing.TB) { AssertOutcome(tb, tt.want, tt.res, tt.err) })
			assert.Equal(t, tt.fails, len(failed) > 0, "%v", failed)
		})
	}
}

func TestAssertCalls(t *testing.T) {
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	params := map[string]string{cloudParam: "creds", "mode": "wait"}

	// The second call sees the outputs of the first.
	last := c.AssertCalls(t, sdk.HookCreate, params, cloudSecrets(),
		[]Outcome{{RequeueAfter: cloudWait}, {Done: true}, {Done: true}}, cloudPassword)
	assert.Equal(t, "terminated", last.Message)

	failed := cloudFailures(t, func(tb testing.TB) {
		c.AssertCalls(tb, sdk.HookCreate, params, cloudSecrets(), []Outcome{{Done: true}, {Done: true}})
	})
	require.NotEmpty(t, failed, "the first call waits")
	assert.Contains(t, failed[0], "call 1")
	assert.Equal(t, "FailNow", failed[len(failed)-1], "a call that is not its outcome ends the calls")

	failed = cloudFailures(t, func(tb testing.TB) {
		c.AssertCalls(tb, sdk.HookCreate, params, cloudSecrets(), []Outcome{{RequeueAfter: cloudWait}, {Done: true}}, "terminated")
	})
	assert.Len(t, failed, 1, "a message showing a secret: %v", failed)

	leaky := map[string]string{cloudParam: "creds", "mode": "leak", "endpoint": WithCredentials("https://cloud.example/api")}
	failed = cloudFailures(t, func(tb testing.TB) {
		c.AssertCalls(tb, sdk.HookCreate, leaky, cloudSecrets(), []Outcome{{Reason: "CloudUnreachable"}}, URLSecrets()...)
	})
	require.Len(t, failed, 1, "an error showing the URL's credentials: %v", failed)
	assert.Contains(t, failed[0], "[1 2 3 4] of the 4 given", "each of them")
	AssertNoSecret(t, failed[0], URLSecrets()...) // masked
}

func TestAssertTeardownDone(t *testing.T) {
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	c.AssertTeardownDone(t, map[string]string{cloudParam: "creds"}, cloudSecrets())

	failed := cloudFailures(t, func(tb testing.TB) {
		c.AssertTeardownDone(tb, map[string]string{cloudParam: "creds", "mode": "wait"}, cloudSecrets())
	})
	assert.Len(t, failed, 1, "Delete waits: %v", failed)
	assert.Contains(t, strings.Join(failed, "\n"), string(sdk.HookDelete))
}

func TestParameters(t *testing.T) {
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	required, types := c.Parameters(t)
	assert.Equal(t, map[string]bool{cloudParam: true, "mode": false, "endpoint": false}, required)
	assert.Equal(t, map[string]string{cloudParam: "secret", "mode": "string", "endpoint": "url"}, types)

	other := c
	other.Executor = "test.other"
	failed := cloudFailures(t, func(tb testing.TB) { other.Parameters(tb) })
	assert.Len(t, failed, 1, "another executor's name: %v", failed)
}

func TestAssertEndpointRefused(t *testing.T) {
	fake := httptest.NewServer(http.NotFoundHandler()) // on loopback, which the policy refuses
	defer fake.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	c := ServeCloud(t, fakeCloud{}, cloudParam)
	call := func(endpoint string) error {
		_, err := c.Create(t, map[string]string{cloudParam: "creds", "mode": "call", "endpoint": endpoint}, cloudSecrets())
		return err
	}

	err := call(WithCredentials(fake.URL + "/api"))
	AssertEndpointRefused(t, err, "127.0.0.1 is a loopback address")
	AssertNoSecret(t, err.Error(), URLSecrets()...)

	for name, check := range map[string]func(tb testing.TB){
		"another why":   func(tb testing.TB) { AssertEndpointRefused(tb, err, "10.0.0.1 is a private address") },
		"no error":      func(tb testing.TB) { AssertEndpointRefused(tb, nil, "127.0.0.1 is a loopback address") },
		"another error": func(tb testing.TB) { AssertEndpointRefused(tb, errors.New("refused"), "refused") },
	} {
		assert.NotEmpty(t, cloudFailures(t, check), name)
	}
}

func TestURLCredentials(t *testing.T) {
	assert.Equal(t, "https://admin:Sup3rS3cret@vc.example/sdk", WithUserInfo("https://vc.example/sdk"))
	assert.Equal(t, "http://admin:Sup3rS3cret@ks.example/v3?token=abc123", WithCredentials("http://ks.example/v3"))
	assert.Equal(t, "ftp://admin:Sup3rS3cret@ec2.example/?a=b&token=abc123", WithCredentials("ftp://ec2.example/?a=b"))

	// Each of URLSecrets is in the URL (a check with them fails for it), and none is left
	// once the SDK redacts it as a message should show it.
	u := WithCredentials("https://cloud.example/api")
	for _, s := range URLSecrets() {
		assert.NotEmpty(t, cloudFailures(t, func(tb testing.TB) { AssertNoSecret(tb, u, s) }), s)
	}
	assert.True(t, AssertNoSecret(t, egress.RedactURL(u), URLSecrets()...))
	// A password with a blank in it, which no URL parser takes, is caught too.
	assert.NotEmpty(t, cloudFailures(t, func(tb testing.TB) {
		AssertNoSecret(tb, "https://admin:Sup3r S3cret@cloud.example", URLSecrets()...)
	}))
}

func TestAssertNoSecret(t *testing.T) {
	assert.True(t, AssertNoSecret(t, "terminated vm-1", "hunter2", ""))
	failed := cloudFailures(t, func(tb testing.TB) { AssertNoSecret(tb, "login hunter2 and abc123", "other", "hunter2", "abc123") })
	require.Len(t, failed, 1, "%v", failed)
	assert.Equal(t, `secret(s) [2 3] of the 3 given shown in "login [secret] and [secret]"`, failed[0])
}

func TestSecretValues(t *testing.T) {
	got := SecretValues(map[string][]byte{"password": []byte(" hunter2\n"), "region": []byte("r1"), "empty": nil})
	assert.Equal(t, []string{"hunter2"}, got, "trimmed; shorter than the SDK removes, left out")
}

func TestPlanTexts(t *testing.T) {
	texts := PlanTexts(sdk.Plan{
		Summary: "summary", Warnings: []string{"warning"},
		Details: []sdk.PlanItem{{Kind: "kind", Name: "name", Action: "action", Note: "note"}},
		Outputs: map[string]string{"key": "value"},
	})
	assert.ElementsMatch(t, []string{"summary", "warning", "kind", "name", "action", "note", "key", "value"}, texts)
}

func TestAssertPlanFailsAsCreate(t *testing.T) {
	e := fakeCloud{}
	planOf := func(mode string) (*sdk.Request, error) {
		req := AddSecret(Request(sdk.HookCreate, "uid", map[string]string{cloudParam: "creds", "mode": mode}), cloudParam, cloudSecrets())
		req.Hook = ""
		_, err := e.Plan(t.Context(), req)
		return req, err
	}
	req, err := planOf("gone")
	AssertPlanFailsAsCreate(t, e, req, err)

	req, err = planOf("plan differs")
	assert.NotEmpty(t, cloudFailures(t, func(tb testing.TB) { AssertPlanFailsAsCreate(tb, e, req, err) }), "another error")

	req, err = planOf("")
	require.NoError(t, err)
	assert.NotEmpty(t, cloudFailures(t, func(tb testing.TB) { AssertPlanFailsAsCreate(tb, e, req, err) }), "a plan that did not fail")
}

func TestCountingTransport(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	counter := &CountingTransport{Base: http.DefaultTransport}
	client := &http.Client{Transport: counter}
	get := func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	get()
	get()
	assert.Equal(t, 2, counter.Count())
	counter.Reset()
	get()
	assert.Equal(t, 1, counter.Count())
}
