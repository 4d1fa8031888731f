// Package upgrade checks on a real API server that objects stored under an older, looser
// schema (or a CRD applied without its rules) cannot stop the operator: it starts, serves
// every other namespace, and reports each such object on the object itself.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := framework.StartCluster(ctx, framework.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start local cluster: %v\n", err)
		return 1
	}
	cluster = c
	code := m.Run()
	if code != 0 {
		c.KeepLogs("upgrade")
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop local cluster: %v\n", err)
	}
	return code
}
