package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGateFlags: a gate's URL may reach public addresses only when the admin allows them
// (--gate-allow-public-addresses, or their CIDR in --gate-allowed-cidrs), and
// --gate-prometheus-url-for sets a namespace's Prometheus.
func TestGateFlags(t *testing.T) {
	const token = "t0ken-s3cr3t"
	tests := []struct {
		name       string
		args       []string
		wantErr    string
		wantURLs   map[string]string
		allowed    []string
		refused    []string
		notInError string
	}{
		{name: "defaults: internal and public addresses refused", refused: []string{"8.8.8.8", "10.96.0.10", "127.0.0.1"}},
		{name: "an internal range", args: []string{"--gate-allowed-cidrs=10.96.0.10/32"},
			allowed: []string{"10.96.0.10"}, refused: []string{"10.96.0.11", "8.8.8.8"}},
		{name: "a public address by its CIDR", args: []string{"--gate-allowed-cidrs=8.8.4.4/32"},
			allowed: []string{"8.8.4.4"}, refused: []string{"8.8.8.8"}},
		{name: "public addresses allowed", args: []string{"--gate-allow-public-addresses"},
			allowed: []string{"8.8.8.8", "2606:4700:4700::1111"}, refused: []string{"10.96.0.10", "169.254.169.254"}},
		{name: "a URL per namespace", args: []string{
			"--gate-prometheus-url-for=ops=http://prom-label-proxy.monitoring:8080/?namespace=ops",
			"--gate-prometheus-url-for=web=https://prometheus.web.svc:9090/prom"},
			wantURLs: map[string]string{"ops": "http://prom-label-proxy.monitoring:8080/?namespace=ops", "web": "https://prometheus.web.svc:9090/prom"},
			refused:  []string{"8.8.8.8"}},
		{name: "not NAMESPACE=URL", args: []string{"--gate-prometheus-url-for=http://prometheus:9090"},
			wantErr: "--gate-prometheus-url-for: an entry is not NAMESPACE=URL"},
		{name: "a URL alone, with a query", args: []string{"--gate-prometheus-url-for=http://admin:" + token + "@prometheus:9090/?a=b"},
			wantErr: "--gate-prometheus-url-for: an entry's NAMESPACE is not a namespace's name", notInError: token},
		{name: "no URL", args: []string{"--gate-prometheus-url-for=ops="}, wantErr: "--gate-prometheus-url-for: an entry is not NAMESPACE=URL"},
		{name: "not a namespace", args: []string{"--gate-prometheus-url-for=Ops=http://prometheus:9090"}, wantErr: "an entry's NAMESPACE is not a namespace's name"},
		{name: "not an http URL", args: []string{"--gate-prometheus-url-for=ops=ftp://prometheus:9090?token=" + token},
			wantErr: "--gate-prometheus-url-for: namespace ops: the Prometheus URL must be http or https", notInError: token},
		{name: "a password", args: []string{"--gate-prometheus-url-for=ops=http://admin:" + token + "@prometheus:9090"},
			wantErr: "namespace ops: the Prometheus URL must be http or https with a host, and hold no user or password", notInError: token},
		{name: "a namespace twice", args: []string{"--gate-prometheus-url-for=ops=http://a:9090", "--gate-prometheus-url-for=ops=http://b:9090"},
			wantErr: "namespace ops is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := parseFlags(t, tt.args...)
			if !validates(t, opts, tt.wantErr, tt.notInError) {
				return
			}
			urls, err := opts.gatePrometheusURLs()
			require.NoError(t, err)
			assert.Equal(t, tt.wantURLs, urls)
			policy, err := opts.gatePolicy()
			require.NoError(t, err)
			for _, addr := range tt.allowed {
				assert.NoError(t, policy.Check(netip.MustParseAddr(addr)), addr)
			}
			for _, addr := range tt.refused {
				assert.Error(t, policy.Check(netip.MustParseAddr(addr)), addr)
			}
		})
	}
}
