package egress

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRefusesAddressesThatAreNotGloballyReachable(t *testing.T) {
	tests := []struct {
		addr      string
		wantRange string // contained in the error's Range
	}{
		{"127.0.0.1", "a loopback address"},
		{"127.255.255.254", "a loopback address"},
		{"::1", "a loopback address"},
		{"0.0.0.0", "an unspecified address"},
		{"::", "an unspecified address"},
		{"0.1.2.3", `"this network"`},
		{"169.254.169.254", "a link-local address (169.254.0.0/16, where cloud metadata services answer)"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "a link-local address"},
		{"fe80::1%eth0", "a link-local address"},
		{"febf:ffff::1", "a link-local address"},
		{"10.0.0.1", "a private address (10.0.0.0/8)"},
		{"10.96.0.1", "a private address"}, // a typical cluster Service IP: the API server's
		{"172.16.0.1", "a private address (172.16.0.0/12)"},
		{"172.31.255.255", "a private address"},
		{"192.168.1.1", "a private address (192.168.0.0/16)"},
		{"fc00::1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"100.64.0.1", "a carrier-grade NAT address"},
		{"100.127.255.255", "a carrier-grade NAT address"},
		{"224.0.0.1", "a multicast address"},
		{"239.255.255.250", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"255.255.255.255", "the broadcast address"},
		{"240.0.0.1", "a reserved address (240.0.0.0/4)"},
		{"192.0.0.8", "an IETF protocol assignment address"},
		{"198.18.0.1", "a benchmarking address"},
		{"198.19.255.255", "a benchmarking address"},
		{"192.0.2.10", "a documentation address"},
		{"2001:db8::1", "a documentation address"},
		{"fec0::1", "a site-local address"},
		{"100::1", "a discard-only address"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo address"},
		{"::7f00:1", "an IPv4-compatible address"},
		{"64:ff9b:1::a00:1", "a local-use NAT64 address"},
		// IPv6 forms of refused IPv4 addresses.
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::ffff:169.254.169.254", "a link-local address"},
		{"::ffff:10.1.2.3", "a private address"},
		{"64:ff9b::127.0.0.1", "a NAT64 address carrying 127.0.0.1, which is a loopback address"},
		{"64:ff9b::a9fe:a9fe", "a NAT64 address carrying 169.254.169.254, which is a link-local address"},
		{"2002:7f00:1::1", "a 6to4 address carrying 127.0.0.1, which is a loopback address"},
		{"2002:c0a8:101::1", "a 6to4 address carrying 192.168.1.1, which is a private address"},
	}
	p := New()
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := p.Check(netip.MustParseAddr(tt.addr))
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			assert.Contains(t, refused.Range, tt.wantRange)
			assert.Contains(t, err.Error(), "--plugin-allowed-cidrs", "the message says how an admin allows it")
		})
	}
}

func TestCheckErrorNamesTheAddressAndItsRange(t *testing.T) {
	err := New().Check(netip.MustParseAddr("127.0.0.1"))
	require.Error(t, err)
	assert.Equal(t, "127.0.0.1 is a loopback address: plugins may not connect to it unless an operator admin "+
		"allows its range with the operator's flag --plugin-allowed-cidrs (kubectl stepwise plugin run: --allowed-cidrs)", err.Error())
	assert.Equal(t, &RefusedError{Addr: netip.MustParseAddr("127.0.0.1"), Range: "a loopback address"}, err)
}

func TestCheckAllowsGloballyReachableAddresses(t *testing.T) {
	for _, addr := range []string{
		"8.8.8.8", "1.1.1.1", "52.94.236.248", "172.15.255.255", "172.32.0.1", "100.63.255.255",
		"100.128.0.1", "192.169.0.1", "198.20.0.1", "223.255.255.255", "11.0.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:8.8.8.8",
		"64:ff9b::808:808", // NAT64 of 8.8.8.8
		"2002:808:808::1",  // 6to4 of 8.8.8.8
	} {
		assert.NoError(t, New().Check(netip.MustParseAddr(addr)), addr)
	}
}

func TestCheckAllowsTheAllowedPrefixes(t *testing.T) {
	p := New(
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("10.20.0.0/16"),
		netip.MustParsePrefix("fd00:1::/64"),
		netip.MustParsePrefix("::ffff:192.168.7.0/120"), // read as 192.168.7.0/24
		netip.MustParsePrefix("169.254.10.5/16"),        // masked to 169.254.0.0/16
	)
	tests := []struct {
		addr    string
		allowed bool
	}{
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"::1", false}, // 127.0.0.0/8 is IPv4 only
		{"10.20.3.4", true},
		{"10.21.3.4", false},
		{"fd00:1::5", true},
		{"fd00:2::5", false},
		{"192.168.7.9", true},
		{"192.168.8.9", false},
		{"169.254.169.254", true},
		{"64:ff9b::a14:304", true}, // NAT64 of 10.20.3.4
		{"64:ff9b::a15:304", false},
		{"8.8.8.8", true},
	}
	for _, tt := range tests {
		err := p.Check(netip.MustParseAddr(tt.addr))
		if tt.allowed {
			assert.NoError(t, err, tt.addr)
		} else {
			assert.Error(t, err, tt.addr)
		}
	}
}

func TestNilPolicyRefuses(t *testing.T) {
	var p *Policy
	assert.Error(t, p.Check(netip.MustParseAddr("127.0.0.1")))
	assert.NoError(t, p.Check(netip.MustParseAddr("8.8.8.8")))
	assert.Error(t, p.Check(netip.Addr{}), "the zero Addr is no address")
}

func TestParse(t *testing.T) {
	tests := []struct {
		csv       string
		allowed   []string // addresses the policy must allow
		refused   []string // addresses it must still refuse
		wantError string
	}{
		{csv: "", refused: []string{"127.0.0.1", "10.0.0.1"}},
		{csv: " , ", refused: []string{"127.0.0.1"}},
		{csv: "127.0.0.0/8", allowed: []string{"127.0.0.1"}, refused: []string{"10.0.0.1"}},
		{csv: "10.20.0.0/16, fd00:1::/64,", allowed: []string{"10.20.0.1", "fd00:1::1"}, refused: []string{"10.21.0.1", "127.0.0.1"}},
		{csv: "10.20.30.40/16", allowed: []string{"10.20.0.1"}},
		{csv: "10.0.0.0/8,not-a-cidr", wantError: `allowed CIDR 2, "not-a-cidr", is not a CIDR`},
		{csv: "10.0.0.1", wantError: `allowed CIDR 1, "10.0.0.1", is not a CIDR`},
		{csv: "10.0.0.0/33", wantError: `"10.0.0.0/33"`},
		{csv: "fd00::/129", wantError: `"fd00::/129"`},
	}
	for _, tt := range tests {
		t.Run(tt.csv, func(t *testing.T) {
			p, err := Parse(tt.csv)
			if tt.wantError != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantError)
				assert.Nil(t, p)
				return
			}
			require.NoError(t, err)
			for _, a := range tt.allowed {
				assert.NoError(t, p.Check(netip.MustParseAddr(a)), a)
			}
			for _, a := range tt.refused {
				assert.Error(t, p.Check(netip.MustParseAddr(a)), a)
			}
		})
	}
}

func TestFromEnvironment(t *testing.T) {
	t.Setenv(EnvAllowedCIDRs, "127.0.0.0/8")
	p, err := FromEnvironment()
	require.NoError(t, err)
	assert.NoError(t, p.Check(netip.MustParseAddr("127.0.0.1")))
	assert.Error(t, p.Check(netip.MustParseAddr("10.0.0.1")))

	t.Setenv(EnvAllowedCIDRs, "")
	p, err = FromEnvironment()
	require.NoError(t, err)
	assert.Error(t, p.Check(netip.MustParseAddr("127.0.0.1")), "nothing allowed when the variable is empty")

	t.Setenv(EnvAllowedCIDRs, "127.0.0.0/8,localhost")
	_, err = FromEnvironment()
	require.Error(t, err)
	assert.Contains(t, err.Error(), EnvAllowedCIDRs)
	assert.Contains(t, err.Error(), "--plugin-allowed-cidrs")
	assert.Contains(t, err.Error(), `"localhost"`)
}

// TestRefusingPublic refuses public addresses too, allows only the given prefixes
// (private or public), and still refuses what the base policy refuses.
func TestRefusingPublic(t *testing.T) {
	p := New(netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("203.0.113.7/32"),
		netip.MustParsePrefix("8.8.4.0/24")).RefusingPublic()
	tests := []struct {
		addr      string
		wantRange string // empty: allowed
	}{
		{addr: "10.96.0.10"},
		{addr: "203.0.113.7"}, // a documentation address, allowed by name
		{addr: "8.8.4.4"},     // a public address, allowed by its prefix
		{addr: "64:ff9b::808:404"},
		{addr: "8.8.8.8", wantRange: "a public address"},
		{addr: "2606:4700:4700::1111", wantRange: "a public address"},
		{addr: "::ffff:1.1.1.1", wantRange: "a public address"},
		{addr: "64:ff9b::808:808", wantRange: "a NAT64 address carrying 8.8.8.8, which is a public address"},
		{addr: "2002:808:808::1", wantRange: "a 6to4 address carrying 8.8.8.8, which is a public address"},
		{addr: "10.0.0.1", wantRange: "a private address (10.0.0.0/8)"},
		{addr: "127.0.0.1", wantRange: "a loopback address"},
		{addr: "169.254.169.254", wantRange: "a link-local address (169.254.0.0/16, where cloud metadata services answer)"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := p.Check(netip.MustParseAddr(tt.addr))
			if tt.wantRange == "" {
				assert.NoError(t, err)
				return
			}
			var refused *RefusedError
			require.ErrorAs(t, err, &refused)
			assert.Equal(t, tt.wantRange, refused.Range)
		})
	}
	var none *Policy
	assert.Error(t, none.RefusingPublic().Check(netip.MustParseAddr("8.8.8.8")), "a nil policy refusing public addresses allows nothing")
	assert.NoError(t, New().Check(netip.MustParseAddr("8.8.8.8")), "the base policy is not changed")
}
