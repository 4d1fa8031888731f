// Command kubectl-stepwise is a kubectl plugin: with it on the PATH, `kubectl stepwise`
// shows the steps of Stepwise Pipelines and steers them (status, watch, retry, suspend,
// resume, plan, executors...), and writes executor plugins and runs their hooks locally
// (plugin init, plugin run). The commands live in pkg/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/stepwise-dev/stepwise/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx)
	stop()
	os.Exit(code)
}
