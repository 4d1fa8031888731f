package egress

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// ReasonEndpointNotAllowed is the reason of a step whose endpoint the policy refuses. It
// is permanent: the same address is refused on every retry until an admin allows it.
const ReasonEndpointNotAllowed = "EndpointNotAllowed"

// RefusedError is an address the policy refuses to connect to.
type RefusedError struct {
	// Addr is the refused address, as connected to (after DNS resolution).
	Addr netip.Addr
	// Range says what the address is; it completes "ADDR is ...", e.g. "a loopback
	// address".
	Range string
}

// Error says what the address is and how an operator admin allows it. It names the
// address only: the URL it came from may carry credentials.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s is %s: plugins may not connect to it unless an operator admin allows its range "+
		"with the operator's flag --plugin-allowed-cidrs (kubectl stepwise plugin run: --allowed-cidrs)", e.Addr, e.Range)
}

// AsPermanent returns, when err wraps a *RefusedError, the permanent error with reason
// EndpointNotAllowed that a plugin answers for it, and nil otherwise. The result carries
// the refusal alone, not err's text, which may quote the URL with its credentials: the
// caller adds what it was doing, with the URL through RedactURL.
//
//	if refused := egress.AsPermanent(err); refused != nil {
//		return fmt.Errorf("POST %s: %w", egress.RedactURL(raw), refused)
//	}
func AsPermanent(err error) error {
	var refused *RefusedError
	if !errors.As(err, &refused) {
		return nil
	}
	return contract.Permanent(ReasonEndpointNotAllowed, refused)
}
