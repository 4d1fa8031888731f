package sdk

import "github.com/stepwise-dev/stepwise/pkg/contract"

// The contract's questions about a hook's error, so that a plugin's tests check what its
// hooks return (and what plugintest's Client.Run gives back) with pkg/sdk alone.

// IsPermanent tells whether err, or an error it wraps, was made with Permanent: the engine
// fails the step at once rather than retry it.
func IsPermanent(err error) bool { return contract.IsPermanent(err) }

// OwnReason is the reason err carries, as the step's condition shows it: the one given to
// Permanent or Retryable, Timeout for a deadline, or "" when it has none (the engine then
// says HookFailed).
func OwnReason(err error) string { return contract.OwnReason(err) }
