package plugintest

// The pieces the tests of an executor acting on a cloud's API share (a VM terminated by
// its provider's API, with credentials from a Secret a parameter names): calls with the
// Secret handed over as the operator hands it, the outcome of each call, and the checks
// that an endpoint the egress policy refuses is refused and that no message shows a
// credential.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// cloudUID is the UID of the made-up pipeline of a Cloud's requests.
const cloudUID = "uid-1"

// Cloud calls, through gRPC, an executor that acts on a remote system with the
// credentials of the Secret its parameter SecretParam names: the calls its tests make
// again and again, with the Secret's data handed over and within an attempt's deadline,
// in one place.
type Cloud struct {
	// Client calls the served executor; use it for a call Run does not make (another
	// deadline, Describe).
	Client *Client
	// Executor is the executor's name.
	Executor string
	// SecretParam is the parameter that names the Secret of the credentials, such as
	// "credentialsSecret".
	SecretParam string
}

// ServeCloud serves exec (Serve) as a Cloud whose credentials Secret secretParam names;
// it stops when the test ends.
func ServeCloud(t testing.TB, exec sdk.Executor, secretParam string) Cloud {
	t.Helper()
	return Cloud{Client: Serve(t, exec), Executor: exec.Name(), SecretParam: secretParam}
}

// AddSecret hands req the data of the Secret that parameter param names as the operator
// does, so that a hook reading either finds it: in Request.SecretParams[param], and merged
// into Request.Secrets. Nil data adds nothing, as for a Secret the step does not name.
func AddSecret(req *sdk.Request, param string, data map[string][]byte) *sdk.Request {
	if data == nil {
		return req
	}
	if req.Secrets == nil {
		req.Secrets = map[string][]byte{}
	}
	maps.Copy(req.Secrets, data)
	if req.SecretParams == nil {
		req.SecretParams = map[string]map[string][]byte{}
	}
	req.SecretParams[param] = data
	return req
}

// Request is the request of the first call of hook of a made-up pipeline (Request), with
// params and, as the data of the Secret SecretParam names, secrets (AddSecret).
func (c Cloud) Request(hook sdk.Hook, params map[string]string, secrets map[string][]byte) *sdk.Request {
	return AddSecret(Request(hook, cloudUID, params), c.SecretParam, secrets)
}

// Run runs one hook with req within 30 seconds, as an attempt's deadline bounds it: a
// hook stuck on a server that never answers fails its test, rather than holding it until
// go test's own timeout.
func (c Cloud) Run(t testing.TB, hook sdk.Hook, req *sdk.Request) (sdk.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	return c.Client.Run(ctx, c.Executor, hook, req)
}

// Create runs Create once with params and secrets: the call most of a cloud executor's
// tests make.
func (c Cloud) Create(t testing.TB, params map[string]string, secrets map[string][]byte) (sdk.Result, error) {
	t.Helper()
	return c.Run(t, sdk.HookCreate, c.Request(sdk.HookCreate, params, secrets))
}

// Outcome is what one call of a hook is to answer: a Result, Done or, when not, asking to
// be called again after RequeueAfter; or, when Reason is set, an *sdk.Error of that reason,
// Permanent or not, which decides whether the engine retries the step.
type Outcome struct {
	Done bool
	// RequeueAfter is the wait a Result that is not done asks for.
	RequeueAfter time.Duration
	// Reason is the error's; empty for a Result.
	Reason string
	// Permanent is whether the error fails the step for good rather than be retried.
	Permanent bool
}

// AssertOutcome checks that res and err, what a call of a hook answered, are want.
func AssertOutcome(t testing.TB, want Outcome, res sdk.Result, err error) bool {
	t.Helper()
	return checkOutcome(t, want, res, err, "")
}

// checkOutcome is AssertOutcome, its failures prefixed with what (the call's number).
func checkOutcome(t testing.TB, want Outcome, res sdk.Result, err error, what string) bool {
	t.Helper()
	if want.Reason != "" {
		var e *sdk.Error
		if !assert.ErrorAs(t, err, &e, "%swant an error %s; result %+v", what, want.Reason, res) {
			return false
		}
		reason := assert.Equal(t, want.Reason, e.Reason, "%s%v", what, err)
		permanent := assert.Equal(t, want.Permanent, e.Permanent, "%spermanent: %v", what, err)
		return reason && permanent
	}
	if !assert.NoError(t, err, "%s", what) {
		return false
	}
	if !assert.Equal(t, want.Done, res.Done, "%sdone: %+v", what, res) {
		return false
	}
	return want.Done || assert.Equal(t, want.RequeueAfter, res.RequeueAfter, "%swait: %+v", what, res)
}

// AssertCalls calls hook once for each of want, in order, each call with the step's own
// outputs the earlier calls returned (Request.Outputs), as the engine hands them to a hook
// called again in a later attempt or after the operator restarted: without the State of
// the last call, so the hook must find from its outputs and the cloud what it did. It
// checks each answer against its Outcome, and that no answer's message, outputs or error
// shows any of noSecret; it returns the last Result (the zero Result when every call
// failed).
func (c Cloud) AssertCalls(t testing.TB, hook sdk.Hook, params map[string]string, secrets map[string][]byte,
	want []Outcome, noSecret ...string) sdk.Result {
	t.Helper()
	var last sdk.Result
	recorded := map[string]string{}
	for i, w := range want {
		req := c.Request(hook, params, secrets)
		req.Outputs[req.Step] = maps.Clone(recorded)
		res, err := c.Run(t, hook, req)
		what := fmt.Sprintf("call %d: ", i+1)
		if !checkOutcome(t, w, res, err, what) {
			t.FailNow()
		}
		if err != nil {
			AssertNoSecret(t, err.Error(), noSecret...)
			continue
		}
		AssertNoSecret(t, res.Message, noSecret...)
		for k, v := range res.Outputs {
			AssertNoSecret(t, k+"="+v, noSecret...)
		}
		maps.Copy(recorded, res.Outputs) // the engine merges a hook's outputs
		last = res
	}
	return last
}

// AssertTeardownDone checks that every teardown hook, called once, is done without error:
// what an executor whose work cannot be undone (a VM terminated) answers, so that deleting
// the pipeline is never held by its step.
func (c Cloud) AssertTeardownDone(t testing.TB, params map[string]string, secrets map[string][]byte) {
	t.Helper()
	for _, hook := range contract.TeardownHooks() {
		res, err := c.Run(t, hook, c.Request(hook, params, secrets))
		require.NoError(t, err, hook)
		assert.True(t, res.Done, "%s: %+v", hook, res)
	}
}

// Parameters asks the served plugin, through gRPC, for its description, checks that it
// describes one executor, this one, with a version and a description of every parameter
// (what `kubectl stepwise` shows a person writing a step), and returns whether each
// parameter is required and its type, by name: what the engine checks a step against.
func (c Cloud) Parameters(t testing.TB) (required map[string]bool, types map[string]string) {
	t.Helper()
	infos, err := c.Client.Describe(t.Context())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, c.Executor, infos[0].GetName())
	assert.NotEmpty(t, infos[0].GetVersion(), "version")
	required, types = map[string]bool{}, map[string]string{}
	for _, p := range infos[0].GetParameters() {
		assert.NotEmpty(t, p.GetDescription(), p.GetName())
		required[p.GetName()] = p.GetRequired()
		types[p.GetName()] = p.GetType()
	}
	return required, types
}

// AssertEndpointRefused checks that err is how a plugin answers an endpoint its egress
// policy refuses (egress.AsPermanent): a permanent error of reason EndpointNotAllowed,
// which the same step would get again, saying why (such as "127.0.0.1 is a loopback
// address") and how the operator allows it (--plugin-allowed-cidrs). A test's fake
// listens on loopback, which the policy refuses unless allowed: this is the check that
// a tenant's Secret cannot point the plugin, which every tenant shares, at it.
func AssertEndpointRefused(t testing.TB, err error, why string) bool {
	t.Helper()
	if !AssertOutcome(t, Outcome{Reason: egress.ReasonEndpointNotAllowed, Permanent: true}, sdk.Result{}, err) {
		return false
	}
	saysWhy := assert.Contains(t, err.Error(), why)
	saysHow := assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
	return saysWhy && saysHow
}

// The credentials WithUserInfo and WithCredentials put in a URL.
const (
	urlUserInfo = "admin:Sup3rS3cret"
	urlToken    = "token=abc123"
)

// WithUserInfo is rawURL, an absolute URL, with a user name and password in it
// (scheme://admin:Sup3rS3cret@host...): an endpoint a tenant wrote with its credentials,
// which no message may show (URLSecrets).
func WithUserInfo(rawURL string) string {
	return strings.Replace(rawURL, "://", "://"+urlUserInfo+"@", 1)
}

// WithCredentials is rawURL with a user name and password (WithUserInfo) and a token in
// its query (token=abc123), which no message may show (URLSecrets).
func WithCredentials(rawURL string) string {
	sep := "?"
	if strings.Contains(rawURL, "?") {
		sep = "&"
	}
	return WithUserInfo(rawURL) + sep + urlToken
}

// URLSecrets are the texts of the credentials WithUserInfo and WithCredentials put in a
// URL, for AssertNoSecret: the user name with its colon, each half of the password on its
// own (a message may cut it, or quote a password with a blank in it), and the token.
func URLSecrets() []string {
	return []string{"admin:", "Sup3r", "S3cret", "abc123"}
}

// AssertNoSecret checks that text, which a person or a log may read (a message, an error,
// a plan), shows none of secrets. The SDK removes a Secret's values from what a hook
// answers; an executor must not rely on that, nor on it finding a value it was not given
// as it is (a URL's password, a value re-encoded). A failure names the secrets found by
// their place in secrets and shows text with every secret masked, as a log must.
func AssertNoSecret(t testing.TB, text string, secrets ...string) bool {
	t.Helper()
	var found []int
	for i, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			found = append(found, i+1)
		}
	}
	if len(found) == 0 {
		return true
	}
	longestFirst := slices.SortedFunc(slices.Values(secrets), func(a, b string) int { return len(b) - len(a) })
	for _, s := range longestFirst {
		if s != "" {
			text = strings.ReplaceAll(text, s, "[secret]")
		}
	}
	t.Errorf("secret(s) %v of the %d given shown in %q", found, len(secrets), text)
	return false
}

// SecretValues are the values of a Secret's data that the SDK removes from what a hook
// answers (of contract.MinRedactedLength or more, blanks trimmed), for AssertNoSecret:
// a text that shows one shows it because the executor put it there.
func SecretValues(data map[string][]byte) []string {
	var values []string
	for _, v := range data {
		if v := strings.TrimSpace(string(v)); len(v) >= contract.MinRedactedLength {
			values = append(values, v)
		}
	}
	return values
}

// PlanTexts are the texts of a plan a person reads (its summary, warnings, details and
// outputs), for AssertNoSecret.
func PlanTexts(p sdk.Plan) []string {
	texts := append([]string{p.Summary}, p.Warnings...)
	for _, d := range p.Details {
		texts = append(texts, d.Kind, d.Name, d.Action, d.Note)
	}
	for k, v := range p.Outputs {
		texts = append(texts, k, v)
	}
	return texts
}

// PlanRequest is what the engine hands exec's Plan for a step of a made-up pipeline (that
// of Request): no hook, and params checked and defaulted against exec's declarations as
// for Create (Checked: the test fails where the engine would refuse them). Hand it a
// Secret's data with AddSecret.
func PlanRequest(t testing.TB, exec sdk.Executor, params map[string]string) *sdk.Request {
	t.Helper()
	return &sdk.Request{
		Pipeline: sdk.PipelineRef{Namespace: "default", Name: "conformance", UID: cloudUID, Generation: 1},
		Step:     "step", Params: Checked(t, exec.Describe(), params), Attempt: 1,
		Outputs: map[string]map[string]string{},
	}
}

// AssertPlanFailsAsCreate checks that planErr, the error of exec's Plan for req, is the
// very error (message and reason) its Create answers for the same request: the engine
// fails a step whose plan fails, so the plan must say what the run would have said.
func AssertPlanFailsAsCreate(t testing.TB, exec sdk.Executor, req *sdk.Request, planErr error) {
	t.Helper()
	require.Error(t, planErr, "the plan")
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	_, createErr := exec.Create(ctx, withHook(req, sdk.HookCreate))
	require.Error(t, createErr, "Create, where the plan failed with %v", planErr)
	assert.Equal(t, createErr.Error(), planErr.Error())
	assert.Equal(t, sdk.OwnReason(createErr), sdk.OwnReason(planErr))
}

// CountingTransport counts the requests that pass through it to Base: wrapped around the
// transport an executor is given (its rate limiter's), it shows that every request to the
// cloud goes through that transport, and how many a hook made.
type CountingTransport struct {
	Base http.RoundTripper
	n    atomic.Int32
}

// RoundTrip counts r and passes it to Base.
func (c *CountingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.Base.RoundTrip(r)
}

// Count is how many requests passed through since it was made or last Reset.
func (c *CountingTransport) Count() int { return int(c.n.Load()) }

// Reset counts from zero again.
func (c *CountingTransport) Reset() { c.n.Store(0) }
