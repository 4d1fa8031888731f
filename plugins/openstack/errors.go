package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// maxBodyExcerpt bounds the part of an error response quoted in a message: the step's
// status is small, and Keystone and Nova explain themselves in their first sentence.
const maxBodyExcerpt = 200

// classify turns an error of a call to OpenStack into a permanent or retryable sdk.Error:
// the caller's mistakes (credentials, permissions, bad requests, an address the egress
// policy refuses) are permanent; the cloud's trouble (5xx, throttling, network) is
// retryable. The message names the action and the HTTP status, never a credential: URLs
// lose their user info and query.
func classify(action string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The hook's attempt ended: the engine reports Timeout and retries.
		return fmt.Errorf("%s: %w", action, egress.RedactError(err))
	}
	if refused := egress.AsPermanent(err); refused != nil {
		return fmt.Errorf("%s: %w", action, refused)
	}
	var resp gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &resp) {
		// No answer from the cloud: connection refused, DNS, TLS, timeout.
		var sdkErr *sdk.Error
		if errors.As(err, &sdkErr) { // e.g. the client-side rate limiter gave up
			return sdkErr
		}
		return sdk.Retryable("CloudUnreachable", fmt.Errorf("%s: %w", action, egress.RedactError(err)))
	}
	msg := fmt.Errorf("%s: %s %s answered HTTP %d: %s", action, resp.Method, egress.RedactURL(resp.URL), resp.Actual, excerpt(resp.Body))
	switch code := resp.Actual; {
	case code == http.StatusUnauthorized:
		return sdk.Permanent("InvalidCredentials", msg)
	case code == http.StatusForbidden:
		return sdk.Permanent("Forbidden", msg)
	case code == http.StatusConflict:
		// A locked server or one in a transitional state: it may pass.
		return sdk.Retryable("Conflict", msg)
	case code == http.StatusTooManyRequests:
		return sdk.Retryable("Throttled", msg)
	case code >= 500:
		return sdk.Retryable("CloudUnavailable", msg)
	case code >= 400:
		return sdk.Permanent("Rejected", msg)
	default:
		return sdk.Retryable("UnexpectedResponse", msg)
	}
}

// excerpt returns the start of a response body on one line, without control characters.
func excerpt(body []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.TrimSpace(string(body)))
	s = contract.Truncate(s, maxBodyExcerpt)
	if s == "" {
		return "(empty body)"
	}
	return s
}
