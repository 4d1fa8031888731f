package index

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

const (
	// DefaultTimeout bounds each request of a Loader made without a client.
	DefaultTimeout = 30 * time.Second
	// maxSignatureSize bounds the bundle: a keyless one, certificate chain and log entry
	// included, is a few KiB.
	maxSignatureSize = 1 << 20
)

// Loader reads plugin indexes from files or http(s) URLs and checks their signatures.
type Loader struct {
	verifier *signature.Verifier
	client   *http.Client
}

// NewLoader returns a Loader that checks signatures with verifier (nil: one without a
// trusted root, which refuses keyless policies) and fetches URLs with client (nil: one
// with DefaultTimeout).
func NewLoader(verifier *signature.Verifier, client *http.Client) *Loader {
	if verifier == nil {
		verifier = &signature.Verifier{}
	}
	if client == nil {
		client = &http.Client{Timeout: DefaultTimeout}
	}
	return &Loader{verifier: verifier, client: client}
}

// Load reads the index at location with NewLoader(verifier, nil).
func Load(ctx context.Context, location string, policy signature.Policy, verifier *signature.Verifier) (*Index, error) {
	return NewLoader(verifier, nil).Load(ctx, location, policy)
}

// Load reads the index at location, a file or an http(s) URL, and its signature next to it
// (SignatureLocation), and returns it only when the signature is over its exact bytes and
// passes policy; the bytes are parsed only then. A refused signature is a wrapped
// *signature.RefusedError (ReasonUnsigned when there is none).
func (l *Loader) Load(ctx context.Context, location string, policy signature.Policy) (*Index, error) {
	if err := policy.Validate(); err != nil {
		return nil, fmt.Errorf("who must have signed the plugin index: %w", err)
	}
	data, err := l.read(ctx, location, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("read the plugin index: %w", err)
	}
	at := SignatureLocation(location)
	bundle, err := l.read(ctx, at, maxSignatureSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the plugin index %s: %w", redact(location),
			&signature.RefusedError{Reason: signature.ReasonUnsigned, Detail: "no signature: " + redact(at) + " is missing"})
	}
	if err != nil {
		return nil, fmt.Errorf("read the plugin index's signature: %w", err)
	}
	sum := sha256.Sum256(data)
	if err := l.verifier.Verify(policy, bundle, sum[:]); err != nil {
		return nil, fmt.Errorf("the plugin index %s: %w", redact(location), err)
	}
	ix, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("the plugin index %s: %w", redact(location), err)
	}
	return ix, nil
}

// SignatureLocation is where the signature of the index at location is: next to it,
// location + ".sigstore.json" (for a URL, appended to its path).
func SignatureLocation(location string) string {
	if !isURL(location) {
		return layout.SignaturePath(location)
	}
	u, err := url.Parse(location)
	if err != nil {
		return layout.SignaturePath(location)
	}
	u.Path += layout.SignatureSuffix
	u.RawPath = ""
	return u.String()
}

func isURL(location string) bool {
	l := strings.ToLower(location)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// read returns at most limit bytes of the file or URL at location; one that is missing is
// an fs.ErrNotExist.
func (l *Loader) read(ctx context.Context, location string, limit int64) ([]byte, error) {
	if isURL(location) {
		return l.get(ctx, location, limit)
	}
	if strings.Contains(location, "://") {
		return nil, fmt.Errorf("%s: a file, or an http or https URL", location)
	}
	f, err := os.Open(location)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readAtMost(f, location, limit)
}

func (l *Loader) get(ctx context.Context, location string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", redact(location), err)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err // names the URL, as url.Error redacts it
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s: %s: %w", redact(location), resp.Status, fs.ErrNotExist)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", redact(location), resp.Status)
	}
	return readAtMost(resp.Body, redact(location), limit)
}

func readAtMost(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return data, nil
}

// redact hides a URL's password, for messages.
func redact(location string) string {
	if u, err := url.Parse(location); err == nil && isURL(location) {
		return u.Redacted()
	}
	return location
}
