package sdk

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/proto"
)

type named struct{ Base }

func (named) Name() string { return "test.debug" }

// TestDebugModePrintsHowToAttach serves in debug mode, reads the line it prints, and
// attaches to the plugin with it as the operator's --plugin-reattach does.
func TestDebugModePrintsHowToAttach(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out, printed := io.Pipe()
	served := make(chan error, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		served <- serveDebug(ctx, printed, io.Discard, named{})
		_ = printed.Close()
	}()

	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(
		`^STEPWISE_PLUGIN_REATTACH=\{"protocolVersion":4,"network":"unix","address":"[^"]+","pid":\d+\}\n$`), line)

	rc, err := proto.ParseReattach([]byte(strings.TrimPrefix(strings.TrimSpace(line), proto.ReattachPrefix)))
	require.NoError(t, err)
	// Watch the server rather than this test's own process (go-plugin's default).
	rc.ReattachFunc = func() (runner.AttachedRunner, error) { return inProcess{stopped: stopped}, nil }
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: proto.Handshake,
		// Attached, go-plugin takes the version as given and dispenses from Plugins only.
		Plugins:          proto.VersionedPlugins(nil)[rc.ProtocolVersion],
		Reattach:         rc,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	rpc, err := client.Client()
	require.NoError(t, err)
	raw, err := rpc.Dispense(proto.PluginName)
	require.NoError(t, err)
	resp, err := raw.(proto.ExecutorClient).Describe(t.Context(), &proto.DescribeRequest{})
	require.NoError(t, err)
	require.Len(t, resp.GetExecutors(), 1)
	assert.Equal(t, "test.debug", resp.GetExecutors()[0].GetName())

	cancel() // the developer's ^C
	<-stopped
	require.NoError(t, <-served)
	_ = rpc.Close()
}
