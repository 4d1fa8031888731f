package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Dial timings of http.DefaultTransport's dialer.
const (
	dialTimeout   = 30 * time.Second
	dialKeepAlive = 30 * time.Second
)

// Control is a net.Dialer's Control: it runs after DNS resolution, just before each
// connection, with the address actually connected to, and refuses what Check refuses. So
// a host name resolving to a refused address, a DNS answer that changes after a first
// look (rebinding), every redirect and every reconnection are checked, not only the URL a
// step names.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP connection (a Unix socket): nothing a tenant's endpoint should reach.
		return fmt.Errorf("egress policy: %s address %q is not an IP address and port", network, address)
	}
	return p.Check(addrPort.Addr())
}

// Dialer returns a dialer, with http.DefaultTransport's timings, that connects only where
// the policy allows. For clients that dial themselves (TLS dialers, SOAP clients).
func (p *Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: dialTimeout, KeepAlive: dialKeepAlive, Control: p.Control}
}

// Transport returns a clone of base (nil: of http.DefaultTransport) that connects only
// where the policy allows. It dials through Dialer, drops base's own dial functions (a TLS
// dialer of base would connect unchecked; TLS is then done over the checked connection
// with base's TLSClientConfig) and uses no proxy: through a proxy, the address connected
// to would be the proxy's, and the proxy would reach the refused address for the plugin.
func (p *Policy) Transport(base *http.Transport) *http.Transport {
	if base == nil {
		if d, ok := http.DefaultTransport.(*http.Transport); ok {
			base = d
		} else {
			base = &http.Transport{}
		}
	}
	t := base.Clone()
	t.Proxy = nil
	t.OnProxyConnectResponse = nil
	t.Dial = nil    //nolint:staticcheck // cleared so that it cannot dial unchecked
	t.DialTLS = nil //nolint:staticcheck // cleared so that it cannot dial unchecked
	t.DialTLSContext = nil
	t.DialContext = p.Dialer().DialContext
	return t
}
