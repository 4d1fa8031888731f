package egress

import (
	"fmt"
	"io"
	"net/http"
)

// MaxResponseBytes is the most of one response a plugin reads from an endpoint a step
// names, after decompression: the answers a step needs are small, and a tenant's
// endpoint must not run a plugin, shared by every tenant, out of memory.
const MaxResponseBytes = 8 << 20

// ResponseTooLargeError is the error of a read past the bound.
type ResponseTooLargeError struct {
	Limit int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the endpoint's answer is more than %d bytes, the most a plugin reads", e.Limit)
}

// LimitResponses wraps rt so that reading a response body past limit bytes fails with a
// ResponseTooLargeError. It counts what the body yields, after the transparent gzip
// decompression of Go's transport, so a small compressed bomb is stopped too.
func LimitResponses(rt http.RoundTripper, limit int64) http.RoundTripper {
	return limitedTransport{next: rt, limit: limit}
}

type limitedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &limitedBody{body: resp.Body, left: t.limit, limit: t.limit}
	return resp, nil
}

// limitedBody reads at most limit bytes of body, then fails.
type limitedBody struct {
	body  io.ReadCloser
	left  int64
	limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a larger one.
		var one [1]byte
		if n, err := b.body.Read(one[:]); n == 0 && err != nil {
			return 0, err
		}
		return 0, &ResponseTooLargeError{Limit: b.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
