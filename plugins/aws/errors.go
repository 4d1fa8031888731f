package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stepwise-dev/stepwise/pkg/sdk"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// EC2 error codes by what they mean for a retry (EC2 API reference, "Error codes").
var (
	// credentialCodes: the access key is wrong, malformed or expired; a retry with the
	// same Secret cannot succeed.
	credentialCodes = map[string]bool{
		"AuthFailure": true, "InvalidClientTokenId": true, "SignatureDoesNotMatch": true,
		"MissingAuthenticationToken": true, "ExpiredToken": true,
	}
	// permissionCodes: the key is valid but may not do this.
	permissionCodes = map[string]bool{
		"UnauthorizedOperation": true, "AccessDenied": true, "OptInRequired": true, "Blocked": true,
	}
	// retryableCodes: the cloud is busy or the instance is between states.
	retryableCodes = map[string]bool{
		"RequestLimitExceeded": true, "Throttling": true, "ThrottlingException": true,
		"InternalError": true, "ServiceUnavailable": true, "Unavailable": true,
		"IncorrectInstanceState": true, "IncorrectState": true, "RequestExpired": true,
	}
)

// isNotFound says whether EC2 does not know the instance (any more): terminated instances
// drop out of DescribeInstances after about an hour.
func isNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.Is(err, errNotListed) || (errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidInstanceID.NotFound")
}

// notRefused tells the SDK's retryer that an address the egress policy refused, and a
// request the client-side rate limit refused, are not worth a retry within the hook (the
// limit fails fast so that the engine retries the hook with its backoff, rather than the
// SDK holding it), and leaves other errors to its other checks.
func notRefused(err error) aws.Ternary {
	var (
		refused *egress.RefusedError
		limited *sdk.Error
	)
	if errors.As(err, &refused) || errors.As(err, &limited) {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// classify turns an error of a call to EC2 into a permanent or retryable sdk.Error: the
// caller's mistakes (credentials, permissions, bad requests, termination protection, an
// endpoint the egress policy refuses) are permanent; the cloud's trouble (5xx, throttling,
// network) is retryable. The message names the action and EC2's error code, never a
// credential: URLs lose their user info and query.
func classify(action string, err error) error {
	if refused := egress.AsPermanent(err); refused != nil {
		return fmt.Errorf("%s: %w", action, refused)
	}
	err = egress.RedactError(err)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The hook's attempt ended: the engine reports Timeout and retries.
		return fmt.Errorf("%s: %w", action, err)
	}
	var sdkErr *sdk.Error
	if errors.As(err, &sdkErr) { // the client-side rate limiter gave up
		return sdkErr
	}
	status := 0
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		if status == 0 {
			// No answer from the cloud: connection refused, DNS, TLS, timeout.
			return sdk.Retryable("CloudUnreachable", fmt.Errorf("%s: %w", action, err))
		}
		return byStatus(status, fmt.Errorf("%s: HTTP %d: %w", action, status, err))
	}
	code := apiErr.ErrorCode()
	msg := fmt.Errorf("%s: %s: %s", action, code, apiErr.ErrorMessage())
	switch {
	case credentialCodes[code]:
		return sdk.Permanent("InvalidCredentials", msg)
	case permissionCodes[code]:
		return sdk.Permanent("Unauthorized", msg)
	case code == "OperationNotPermitted":
		// Termination protection (disableApiTermination) or a managed instance.
		return sdk.Permanent("OperationNotPermitted", msg)
	case code == "InvalidInstanceID.Malformed":
		return sdk.Permanent("InvalidProviderID", msg)
	case retryableCodes[code]:
		if status == http.StatusTooManyRequests || code == "RequestLimitExceeded" || code == "Throttling" || code == "ThrottlingException" {
			return sdk.Retryable("Throttled", msg)
		}
		return sdk.Retryable("CloudUnavailable", msg)
	}
	return byStatus(status, msg)
}

// byStatus classifies by HTTP status what the error code did not settle.
func byStatus(status int, err error) error {
	switch {
	case status == http.StatusTooManyRequests:
		return sdk.Retryable("Throttled", err)
	case status >= 500:
		return sdk.Retryable("CloudUnavailable", err)
	case status >= 400:
		return sdk.Permanent("Rejected", err)
	default:
		return sdk.Retryable("UnexpectedResponse", err)
	}
}
