package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinksNoEngine keeps the kubectl plugin a client: everything it needs of the API
// (finalizer, annotations, reasons) lives in pkg/apis, and of the trigger's rules in
// pkg/trigger/rules, so it never links the engine, the trigger's controller, their
// workqueues or their metrics.
func TestLinksNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	for _, forbidden := range []string{
		"github.com/stepwise-dev/stepwise/pkg/controller",
		"github.com/stepwise-dev/stepwise/pkg/trigger",
		"github.com/stepwise-dev/stepwise/pkg/metrics",
		"github.com/prometheus/client_golang/prometheus",
	} {
		assert.NotContains(t, deps, forbidden)
	}
}
