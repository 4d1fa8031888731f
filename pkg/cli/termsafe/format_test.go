package termsafe

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
)

func TestCheckFormat(t *testing.T) {
	for _, ok := range []string{"", "json", "yaml"} {
		assert.NoError(t, CheckFormat(ok), ok)
	}
	assert.EqualError(t, CheckFormat("wide"), `--output "wide" is not supported: use json or yaml`)
}

func TestEncode(t *testing.T) {
	obj := map[string]string{"message": termsafetest.Hostile}
	tests := []struct {
		format string
		// wantStart is how the document starts: JSON indented by four spaces, as kubectl's.
		wantStart string
	}{
		{format: "json", wantStart: "{\n    \"message\": \"\\u001b]0;pwned\\u0007"},
		{format: "yaml", wantStart: "message: "},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			got, err := Encode(obj, tt.format)
			require.NoError(t, err)
			termsafetest.AssertSafe(t, string(got))
			assert.True(t, strings.HasPrefix(string(got), tt.wantStart), "%q", got)
			var back map[string]string
			require.NoError(t, yaml.Unmarshal(got, &back))
			assert.Equal(t, strings.ToValidUTF8(termsafetest.Hostile, "\uFFFD"), back["message"], "the document says the same, escaped")
		})
	}
}
