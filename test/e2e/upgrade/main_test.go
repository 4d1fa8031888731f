// Package upgrade checks on a real API server that objects stored under an older, looser
// schema (or a CRD applied without its rules) cannot stop the operator: it starts, serves
// every other namespace, and reports each such object on the object itself.
package upgrade

import (
	"os"
	"testing"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Suite{Name: "upgrade",
		Ready: func(c *framework.Cluster, _ *framework.Operator) { cluster = c }}))
}
