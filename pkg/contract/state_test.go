package contract

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckState(t *testing.T) {
	entries := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprint("k", i)] = "v"
		}
		return m
	}
	tests := []struct {
		name  string
		state map[string]string
		ok    bool
	}{
		{"none", nil, true},
		{"as many entries as kept", entries(MaxStateEntries), true},
		{"one entry more", entries(MaxStateEntries + 1), false},
		{"as many bytes as kept", map[string]string{"k": strings.Repeat("v", MaxStateSize-1)}, true},
		{"one byte more", map[string]string{"k": strings.Repeat("v", MaxStateSize)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckState(tt.state)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "a step keeps at most 16 state entries of 4096 bytes")
			}
		})
	}
}
