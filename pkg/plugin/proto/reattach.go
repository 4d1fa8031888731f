package proto

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/go-plugin"
)

// ReattachEnv is the variable whose value "1" makes sdk.Serve run a plugin for a debugger:
// it serves without the operator having started it, and prints ReattachPrefix and its
// Reattach as JSON on stdout, for the operator's --plugin-reattach.
const (
	ReattachEnv    = "STEPWISE_PLUGIN_DEBUG"
	ReattachPrefix = "STEPWISE_PLUGIN_REATTACH="
)

// Reattach is how to reach a plugin the operator did not start (one running under a
// debugger), in a form JSON can carry (go-plugin's ReattachConfig holds a net.Addr).
type Reattach struct {
	ProtocolVersion int    `json:"protocolVersion"`
	Network         string `json:"network"`
	Address         string `json:"address"`
	Pid             int    `json:"pid"`
}

// ReattachOf describes go-plugin's config of a plugin serving in debug mode.
func ReattachOf(cfg *plugin.ReattachConfig) Reattach {
	return Reattach{ProtocolVersion: cfg.ProtocolVersion, Network: cfg.Addr.Network(), Address: cfg.Addr.String(), Pid: cfg.Pid}
}

// ParseReattach reads a Reattach from its JSON.
func ParseReattach(data []byte) (*plugin.ReattachConfig, error) {
	var r Reattach
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read the reattach JSON: %w", err)
	}
	if r.Address == "" || r.Pid == 0 {
		return nil, errors.New("the reattach JSON needs an address and a pid")
	}
	var addr net.Addr
	var err error
	switch r.Network {
	case "unix":
		addr, err = net.ResolveUnixAddr("unix", r.Address)
	case "tcp":
		addr, err = net.ResolveTCPAddr("tcp", r.Address)
	default:
		return nil, fmt.Errorf("the reattach JSON names network %q, not unix or tcp", r.Network)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve the reattach address: %w", err)
	}
	return &plugin.ReattachConfig{
		Protocol: plugin.ProtocolGRPC, ProtocolVersion: r.ProtocolVersion, Addr: addr, Pid: r.Pid,
		// The plugin is the developer's: the operator never kills it.
		Test: true,
	}, nil
}
