package flagpairs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		pairs   []string
		want    map[string]string
		wantErr string
	}{
		{name: "none", want: map[string]string{}},
		{name: "pairs", pairs: []string{"node=worker-3", "pool=blue"}, want: map[string]string{"node": "worker-3", "pool": "blue"}},
		{name: "the value holds what follows the first =", pairs: []string{"expr=a=b"}, want: map[string]string{"expr": "a=b"}},
		{name: "an empty value", pairs: []string{"note="}, want: map[string]string{"note": ""}},
		{name: "no =", pairs: []string{"node"}, wantErr: `parameter "node" is not NAME=VALUE`},
		{name: "no name", pairs: []string{"=x"}, wantErr: `parameter "=x" is not NAME=VALUE`},
		{name: "a name twice", pairs: []string{"node=a", "node=b"}, wantErr: "parameter node is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("parameter", tt.pairs)
			if tt.wantErr != "" {
				require.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
