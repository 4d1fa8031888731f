package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
	"github.com/stepwise-dev/stepwise/pkg/sdk/sdkhttp"
)

const (
	executorName = "webhook.call"
	version      = "v0.1.0"

	// Request headers.
	headerSignature      = "X-Stepwise-Signature"
	headerTimestamp      = "X-Stepwise-Timestamp"
	headerIdempotencyKey = "Idempotency-Key"

	// headerResult is the answer's header by which a receiver says that its body is an
	// answer of this protocol ({"outputs": {...}, "message": "..."}), in version resultV1.
	// Without it, nothing of the body reaches the step's status: a URL that names some
	// other service (an internal API answering JSON with a "message") must not be read
	// back through a pipeline.
	headerResult = "X-Stepwise-Result"
	resultV1     = "v1"

	// Secret keys read from the data of the Secret named by credentialsSecret.
	keyHMAC = "hmacKey"
	keyCA   = "ca.crt"

	// requestTimeout bounds one call, so that a hung receiver costs one retry rather than
	// the whole attempt of the hook.
	requestTimeout = 30 * time.Second

	// Bounds on what a receiver answers, so the Pipeline's status stays small.
	maxResponseBody = 64 << 10
	maxMessage      = 256
	maxExcerpt      = 200
	maxOutputs      = 16
	maxOutputsSize  = 2048
	maxLocation     = 256
)

// outputKeyPattern is what a step output key may look like: later steps refer to it as
// $(steps.STEP.outputs.KEY).
var outputKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// call is webhook.call. Create calls the webhook; Delete calls it too when the parameter
// onDelete is "true" (by default a pipeline's teardown does not call it: most hooks, like
// terminating a machine, have nothing to undo). The other hooks are sdk.Base's no-ops.
type call struct {
	sdk.Base
	// policy says which addresses a call may connect to: a pipeline's author names the
	// URL, and the plugin runs inside the operator's pod.
	policy *egress.Policy
	// wrap puts the plugin's rate limit around the transport of a call.
	wrap func(http.RoundTripper) http.RoundTripper
	// outcomes maps answers and failed calls to results and errors, with this plugin's
	// reasons (WebhookRejected...) and the URL named without its user info and query.
	outcomes sdkhttp.Outcomes
}

// newCall returns the executor; policy checks every address a call connects to, wrap puts
// a transport behind the plugin's client-side rate limit (shared by every call of the
// plugin).
func newCall(policy *egress.Policy, wrap func(http.RoundTripper) http.RoundTripper) *call {
	return &call{policy: policy, wrap: wrap, outcomes: sdkhttp.Outcomes{
		ReasonPrefix: "Webhook",
		Name:         func(method, url string) string { return method + " " + egress.RedactURL(url) },
	}}
}

func (*call) Name() string { return executorName }

func (*call) Describe() sdk.Description {
	return sdk.Description{
		Version:     version,
		Description: "POSTs a signed JSON description of the hook to a URL and maps the answer to the step's result.",
		Parameters: []sdk.Parameter{
			{Name: "url", Required: true, Description: "The http(s) URL to POST to (https recommended; the body is signed, not encrypted)."},
			{Name: "credentialsSecret", Required: true, Description: "Secret in the pipeline's namespace with key hmacKey (signs each request) and optional ca.crt (PEM CA bundle to verify the receiver's TLS certificate)."},
			{Name: "onDelete", Description: `"true" to call the webhook on the pipeline's teardown (hook Delete) too; default "false": Create only.`},
		},
	}
}

func (c *call) Create(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	if _, err := onDelete(req.Params); err != nil {
		return sdk.Result{}, err
	}
	return c.call(ctx, req)
}

func (c *call) Delete(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	on, err := onDelete(req.Params)
	if err != nil {
		return sdk.Result{}, err
	}
	if !on {
		return sdk.Done("onDelete is not true: the webhook is not called on teardown"), nil
	}
	return c.call(ctx, req)
}

func onDelete(params map[string]string) (bool, error) {
	v := strings.TrimSpace(params["onDelete"])
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, sdk.Permanent("InvalidParameter", fmt.Errorf("parameter onDelete %q is not true or false", v))
	}
	return on, nil
}

// payload is the JSON body of a call. It carries no Secret data.
type payload struct {
	Hook     sdk.Hook          `json:"hook"`
	Pipeline pipelineRef       `json:"pipeline"`
	Step     string            `json:"step"`
	Params   map[string]string `json:"params"`
	// Outputs are this step's outputs so far, e.g. from an earlier 202 answer: a receiver
	// can hand itself an operation ID to look at on the next call.
	Outputs        map[string]string `json:"outputs,omitempty"`
	IdempotencyKey string            `json:"idempotencyKey"`
	Attempt        int32             `json:"attempt"`
}

type pipelineRef struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Generation int64  `json:"generation"`
}

// answer is what a receiver may put in the JSON body of a 2xx.
type answer struct {
	Outputs map[string]string `json:"outputs"`
	Message string            `json:"message"`
}

func (c *call) call(ctx context.Context, req *sdk.Request) (sdk.Result, error) {
	target, err := parseURL(req.Params["url"])
	if err != nil {
		return sdk.Result{}, err
	}
	key := req.Secrets[keyHMAC]
	if len(key) == 0 {
		return sdk.Result{}, sdk.Permanent("MissingCredentials", fmt.Errorf(
			"the Secret named by parameter credentialsSecret lacks key %s, which signs the calls", keyHMAC))
	}
	client, err := c.client(req.Secrets[keyCA])
	if err != nil {
		return sdk.Result{}, err
	}
	defer client.CloseIdleConnections()

	body, err := json.Marshal(payload{
		Hook:     req.Hook,
		Pipeline: pipelineRef{Namespace: req.Pipeline.Namespace, Name: req.Pipeline.Name, UID: req.Pipeline.UID, Generation: req.Pipeline.Generation},
		Step:     req.Step, Params: req.Params, Outputs: req.Outputs[req.Step],
		IdempotencyKey: req.IdempotencyKey, Attempt: req.Attempt,
	})
	if err != nil {
		return sdk.Result{}, sdk.Permanent("InvalidParameter", fmt.Errorf("encode the call: %w", err))
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return sdk.Result{}, sdk.Permanent("InvalidParameter", fmt.Errorf("parameter url: %w", err))
	}
	timestamp := strconv.FormatInt(time.Now().Unix(), 10)
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("User-Agent", "stepwise-plugin-webhook/"+version)
	httpReq.Header.Set(headerTimestamp, timestamp)
	httpReq.Header.Set(headerSignature, "sha256="+sign(key, timestamp, body))
	httpReq.Header.Set(headerIdempotencyKey, req.IdempotencyKey)

	where := "POST " + egress.RedactURL(target.String())
	resp, err := client.Do(httpReq)
	if err != nil {
		return sdk.Result{}, c.noAnswer(ctx, where, err)
	}
	defer func() { _ = resp.Body.Close() }()
	return c.interpret(ctx, where, resp)
}

// noAnswer is the error of a call that got no answer: the hook's deadline, or what
// sdkhttp says of the rest (the rate limiter, an address the policy refuses, a connection
// that failed). where names the call when err, not net/http's, does not.
func (c *call) noAnswer(ctx context.Context, where string, err error) error {
	if ctx.Err() != nil {
		// The hook's attempt ended: the engine reports Timeout and retries.
		return fmt.Errorf("%s: %w", where, ctx.Err())
	}
	mapped := c.outcomes.Error(err)
	if untrusted(err) {
		mapped = fmt.Errorf("%w (give the receiver's CA in key %s of the Secret)", mapped, keyCA)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return mapped // net/http's names the call: "POST https://host/path: could not connect ..."
	}
	return fmt.Errorf("%s: %w", where, mapped)
}

// untrusted tells whether err is a TLS certificate the receiver's owner can make trusted.
func untrusted(err error) bool {
	var (
		certErr   *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
	)
	return errors.As(err, &certErr) || errors.As(err, &authority)
}

// interpret maps a receiver's answer to the hook's result (sdkhttp.Result): 2xx done (202:
// look again), 429 look again after Retry-After, other 3xx/4xx permanent, 5xx retryable.
// Messages name the status by its code and Go's text for it, never by the receiver's
// words: neither its reason phrase nor its body reaches the step's status, but for the
// outputs and message of a 2xx that opted in (headerResult).
func (c *call) interpret(ctx context.Context, where string, resp *http.Response) (sdk.Result, error) {
	status := resp.StatusCode
	res, err := c.outcomes.Result(resp, fmt.Sprintf("webhook answered %d", status))
	switch {
	case err != nil && status >= 300 && status < 400:
		return sdk.Result{}, fmt.Errorf("%w (to %q): set url to the final address", err, location(resp))
	case err != nil:
		return sdk.Result{}, err
	case status < 200 || status >= 300:
		return res, nil // a 429 that waits: its body is not read
	}
	a, err := c.readAnswer(ctx, where, resp)
	if err != nil {
		return sdk.Result{}, err
	}
	if a.Message != "" {
		res.Message = a.Message
	}
	res.Outputs = a.Outputs
	return res, nil
}

// location is the Location of a redirect as a message shows it: without user info or
// query, on one line, bounded.
func location(resp *http.Response) string {
	return contract.Truncate(oneLine(egress.RedactURL(resp.Header.Get("Location"))), maxLocation)
}

// readAnswer reads the {"outputs": {...}, "message": "..."} of a 2xx answer when the
// receiver opted in with headerResult; any other body carries nothing, and is not read.
func (c *call) readAnswer(ctx context.Context, where string, resp *http.Response) (answer, error) {
	version, optedIn := resp.Header[http.CanonicalHeaderKey(headerResult)]
	if !optedIn {
		return answer{}, nil
	}
	answered := fmt.Sprintf("%s: answered %s", where, sdkhttp.StatusText(resp.StatusCode))
	if len(version) != 1 || !strings.EqualFold(strings.TrimSpace(version[0]), resultV1) {
		// The value is not quoted: it is the receiver's text.
		return answer{}, sdk.Permanent("InvalidWebhookResponse", fmt.Errorf(
			"%s with a header %s other than %s, the version of the answer this plugin reads", answered, headerResult, resultV1))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return answer{}, c.noAnswer(ctx, where+": read the answer", err)
	}
	return decodeAnswer(answered, resp, body)
}

// decodeAnswer decodes the answer of a receiver that opted in. A body that is not JSON (no
// application/json content type) carries nothing.
func decodeAnswer(answered string, resp *http.Response, body []byte) (answer, error) {
	var a answer
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType != "application/json" || len(bytes.TrimSpace(body)) == 0 {
		return a, nil
	}
	invalid := func(err error) error {
		return sdk.Permanent("InvalidWebhookResponse", fmt.Errorf("%s with %w", answered, err))
	}
	if len(body) >= maxResponseBody {
		return answer{}, invalid(fmt.Errorf("a JSON body over %d bytes", maxResponseBody))
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return answer{}, invalid(fmt.Errorf("a JSON body that is not {\"outputs\": {...}, \"message\": \"...\"}: %w", err))
	}
	size := 0
	for k, v := range a.Outputs {
		if !outputKeyPattern.MatchString(k) {
			return answer{}, invalid(fmt.Errorf("output key %q, which is not a name (letters, digits, _ . -)", excerpt([]byte(k))))
		}
		size += len(k) + len(v)
	}
	if len(a.Outputs) > maxOutputs || size > maxOutputsSize {
		return answer{}, invalid(fmt.Errorf("%d outputs of %d bytes; at most %d outputs and %d bytes", len(a.Outputs), size, maxOutputs, maxOutputsSize))
	}
	a.Message = contract.Truncate(oneLine(a.Message), maxMessage)
	return a, nil
}

// client returns the HTTP client of one call, trusting caPEM (if any) for TLS, behind the
// plugin's rate limit. It connects only where the egress policy allows, and never follows
// redirects.
func (c *call) client(caPEM []byte) (*http.Client, error) {
	transport := c.policy.Transport(nil)
	if len(bytes.TrimSpace(caPEM)) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, sdk.Permanent("InvalidCABundle", fmt.Errorf("secret key %s holds no PEM certificate", keyCA))
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport:     c.wrap(egress.LimitResponses(transport, egress.MaxResponseBytes)),
		Timeout:       requestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

func parseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, sdk.Permanent("InvalidParameter", errors.New("parameter url is required"))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// Not quoting raw: a URL may carry credentials in its user info.
		return nil, sdk.Permanent("InvalidParameter", errors.New("parameter url is not an absolute http(s) URL"))
	}
	return u, nil
}

// sign returns the hex HMAC-SHA256, keyed by key, of timestamp + "." + body: what the
// receiver recomputes to check X-Stepwise-Signature. Signing the timestamp too lets a
// receiver refuse replays of old calls.
func sign(key []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// excerpt is the start of a text of an answer on one line, for a message.
func excerpt(body []byte) string {
	s := contract.Truncate(oneLine(string(body)), maxExcerpt)
	if s == "" {
		return "(empty body)"
	}
	return s
}

func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s))
}
