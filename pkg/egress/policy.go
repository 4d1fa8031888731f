// Package egress is the address policy of the endpoints a tenant names: in a step, the URL
// of a webhook, the authURL of a Keystone, the endpoint of an EC2-compatible API, the URL
// of a vCenter; in a trigger, a health gate's Prometheus. The plugins use it through the
// SDK (pkg/sdk/egress, which re-exports it), the operator directly: the operator links
// none of the SDK.
//
// A plugin runs inside the operator's pod, with the pod's network: without a
// policy, a pipeline author could make a plugin call the cluster's own services, the
// node's loopback or the cloud's metadata service (169.254.169.254, which hands out the
// node's credentials), and read the answer back in the step's status.
//
// The policy refuses every address that is not globally reachable (loopback, private,
// link-local, CGNAT, multicast, reserved and their IPv6 forms), unless an operator admin
// allows its range with the operator's flag --plugin-allowed-cidrs, which the operator
// hands to its plugins in the environment variable STEPWISE_PLUGIN_ALLOWED_CIDRS. It is
// checked on the address being connected to, after DNS resolution (Policy.Control on a
// net.Dialer), so a name that resolves to a refused address, a DNS answer that changes
// between a check and the connection (rebinding), a redirect and a reconnection are all
// refused alike.
//
//	policy, err := egress.FromEnvironment()
//	client := &http.Client{Transport: policy.Transport(nil)}
//	...
//	if refused := egress.AsPermanent(err); refused != nil { return fmt.Errorf("call %s: %w", egress.RedactURL(raw), refused) }
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
)

// EnvAllowedCIDRs is the environment variable holding the comma-separated CIDRs that the
// operator allows despite the policy: the value of its flag --plugin-allowed-cidrs.
// Plugins start with an otherwise empty environment.
const EnvAllowedCIDRs = "STEPWISE_PLUGIN_ALLOWED_CIDRS"

// Policy decides which addresses a plugin may connect to: every globally reachable
// address (unless RefusingPublic), and the addresses in the prefixes an operator admin
// allowed. A nil *Policy allows no prefix: it refuses what the policy refuses. A Policy is
// immutable, so one serves every hook of a plugin.
type Policy struct {
	allowed []netip.Prefix
	// refusePublic refuses globally reachable addresses too: see RefusingPublic.
	refusePublic bool
}

// RefusingPublic returns the policy that refuses what p refuses and globally reachable
// addresses too: it allows only p's prefixes (which may be public ones). It is for the
// operator's own requests to an address a tenant names (a trigger's Prometheus gate),
// which have no reason to leave the cluster unless an admin says so, and which would
// otherwise let a tenant send the operator's requests anywhere on the Internet.
func (p *Policy) RefusingPublic() *Policy {
	out := &Policy{refusePublic: true}
	if p != nil {
		out.allowed = p.allowed
	}
	return out
}

// New returns the policy that allows the given prefixes despite the refused ranges (e.g.
// the vCenter's subnet, or 127.0.0.0/8 in a test). IPv4-mapped IPv6 prefixes are read as
// the IPv4 prefixes they map, as addresses are.
func New(allowed ...netip.Prefix) *Policy {
	p := &Policy{}
	for _, prefix := range allowed {
		if !prefix.IsValid() {
			continue
		}
		if prefix.Addr().Is4In6() && prefix.Bits() >= 96 {
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
		}
		p.allowed = append(p.allowed, prefix.Masked())
	}
	return p
}

// Parse reads a comma-separated list of CIDRs such as "10.20.0.0/16, fd00:1::/64" (blank
// entries are skipped; an empty list allows nothing). The error names the entry that is
// not a CIDR.
func Parse(csv string) (*Policy, error) {
	var allowed []netip.Prefix
	for i, entry := range strings.Split(csv, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(entry)
		if err != nil {
			return nil, fmt.Errorf("allowed CIDR %d, %q, is not a CIDR such as 10.20.0.0/16 or fd00:1::/64", i+1, entry)
		}
		allowed = append(allowed, prefix)
	}
	return New(allowed...), nil
}

// FromEnvironment is the policy with the CIDRs of the environment variable
// STEPWISE_PLUGIN_ALLOWED_CIDRS (none when it is unset). A plugin's main calls it once and
// exits when it fails: a plugin must not run with another policy than the admin asked for.
func FromEnvironment() (*Policy, error) {
	p, err := Parse(os.Getenv(EnvAllowedCIDRs))
	if err != nil {
		return nil, fmt.Errorf("read the environment variable %s (the operator's flag --plugin-allowed-cidrs): %w", EnvAllowedCIDRs, err)
	}
	return p, nil
}

// Check returns nil when a plugin may connect to ip, and a *RefusedError naming the range
// otherwise. It refuses, unless ip is in an allowed prefix:
//
//   - loopback (127.0.0.0/8, ::1) and unspecified (0.0.0.0, ::) addresses, and 0.0.0.0/8;
//   - link-local addresses (169.254.0.0/16, where cloud metadata services answer, and
//     fe80::/10);
//   - private addresses (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7). A cluster's
//     Service and pod CIDRs are such ranges in practice (and sometimes 100.64.0.0/10), so
//     this is what keeps a tenant off the cluster's own services and the API server;
//   - carrier-grade NAT (100.64.0.0/10), multicast, broadcast, reserved (240.0.0.0/4),
//     IETF protocol assignments (192.0.0.0/24), benchmarking (198.18.0.0/15) and
//     documentation addresses, and IPv6's discard, site-local, Teredo, local-use NAT64 and
//     deprecated IPv4-compatible ranges;
//   - IPv6 addresses that carry a refused IPv4 address: IPv4-mapped (::ffff:a.b.c.d, read
//     as a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16);
//   - of a policy RefusingPublic, every other address too ("a public address").
func (p *Policy) Check(ip netip.Addr) error {
	if !ip.IsValid() {
		return &RefusedError{Addr: ip, Range: "not an IP address"}
	}
	// netip.Prefix.Contains is false for an address with a zone: drop it, so that
	// fe80::1%eth0 is checked as fe80::1.
	ip = ip.Unmap().WithZone("")
	if p.allows(ip) {
		return nil
	}
	for _, r := range refusedRanges {
		if !r.prefix.Contains(ip) {
			continue
		}
		if r.embedded == nil {
			return &RefusedError{Addr: ip, Range: r.name}
		}
		err := p.Check(r.embedded(ip))
		var inner *RefusedError
		if errors.As(err, &inner) {
			return &RefusedError{Addr: ip, Range: fmt.Sprintf("%s carrying %s, which is %s", r.name, inner.Addr, inner.Range)}
		}
		return nil // translated to an allowed IPv4 address
	}
	if p != nil && p.refusePublic {
		return &RefusedError{Addr: ip, Range: "a public address"}
	}
	return nil
}

func (p *Policy) allows(ip netip.Addr) bool {
	if p == nil {
		return false
	}
	for _, prefix := range p.allowed {
		if prefix.Contains(ip) {
			return true
		}
	}
	return false
}
