// Package executortest holds checks that the tests of built-in executors share.
package executortest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// AssertBuiltInDescription checks what a built-in executor says about itself for the
// catalogue: a description, its parameters in order, each described, and which are
// required.
func AssertBuiltInDescription(t *testing.T, e executor.TaskExecutor, wantParams, wantRequired []string) {
	t.Helper()
	d := executor.Describe(e)
	assert.NotEmpty(t, d.Description)
	assert.Empty(t, d.Plugin, "built in")
	var names, required []string
	for _, p := range d.Parameters {
		names = append(names, p.Name)
		if p.Required {
			required = append(required, p.Name)
		}
		assert.NotEmpty(t, p.Description, p.Name)
	}
	assert.Equal(t, wantParams, names)
	assert.Equal(t, wantRequired, required)
}
