package egress

import "net/netip"

// refusedRange is a range of addresses that are not globally reachable (IANA's IPv4 and
// IPv6 Special-Purpose Address Registries), with how a message names it.
type refusedRange struct {
	prefix netip.Prefix
	// name completes "ADDRESS is ...".
	name string
	// embedded, when set, is the IPv4 address an address of the range stands for (NAT64,
	// 6to4): the address is refused when that one is, and allowed otherwise.
	embedded func(netip.Addr) netip.Addr
}

// refusedRanges are checked in order: the first range that holds an address names it, so
// single addresses come before the ranges around them. It is never modified.
var refusedRanges = []refusedRange{
	// IPv4.
	{prefix: netip.MustParsePrefix("0.0.0.0/32"), name: "an unspecified address"},
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), name: `an address of "this network" (0.0.0.0/8)`},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), name: "a loopback address"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), name: "a link-local address (169.254.0.0/16, where cloud metadata services answer)"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), name: "a private address (10.0.0.0/8)"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), name: "a private address (172.16.0.0/12)"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), name: "a private address (192.168.0.0/16)"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), name: "a carrier-grade NAT address (100.64.0.0/10)"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), name: "an IETF protocol assignment address (192.0.0.0/24)"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), name: "a documentation address (192.0.2.0/24)"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), name: "a documentation address (198.51.100.0/24)"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), name: "a documentation address (203.0.113.0/24)"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), name: "a benchmarking address (198.18.0.0/15)"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), name: "a multicast address"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), name: "the broadcast address"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), name: "a reserved address (240.0.0.0/4)"},

	// IPv6. IPv4-mapped addresses (::ffff:0:0/96) are unmapped before the check.
	{prefix: netip.MustParsePrefix("::/128"), name: "an unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), name: "a loopback address"},
	{prefix: netip.MustParsePrefix("::/96"), name: "an IPv4-compatible address (::/96, deprecated)"},
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), name: "a NAT64 address", embedded: last32},
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), name: "a local-use NAT64 address (64:ff9b:1::/48)"},
	{prefix: netip.MustParsePrefix("100::/64"), name: "a discard-only address (100::/64)"},
	{prefix: netip.MustParsePrefix("2001::/32"), name: "a Teredo address (2001::/32)"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), name: "a documentation address (2001:db8::/32)"},
	{prefix: netip.MustParsePrefix("2002::/16"), name: "a 6to4 address", embedded: sixToFour},
	{prefix: netip.MustParsePrefix("fc00::/7"), name: "a private address (unique local, fc00::/7)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), name: "a link-local address (fe80::/10)"},
	{prefix: netip.MustParsePrefix("fec0::/10"), name: "a site-local address (fec0::/10, deprecated)"},
	{prefix: netip.MustParsePrefix("ff00::/8"), name: "a multicast address"},
}

// last32 is the IPv4 address in the last 32 bits of a NAT64 address (RFC 6052, /96).
func last32(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}

// sixToFour is the IPv4 address in bits 16 to 47 of a 6to4 address (RFC 3056).
func sixToFour(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[2:6]))
}
