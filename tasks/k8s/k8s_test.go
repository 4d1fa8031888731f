package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExecutors(t *testing.T) {
	var names []string
	for _, e := range Executors() {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"k8s.apply", "k8s.wait", "k8s.scale"}, names)
}
