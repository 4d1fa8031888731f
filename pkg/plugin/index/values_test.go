package index

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// chartValues is what the chart reads of its values, as far as these tests look.
type chartValues struct {
	Plugins  []ChartPlugin `json:"plugins"`
	Replicas int           `json:"replicas"`
}

func TestChartValues(t *testing.T) {
	ix := sample(newKeys(t))
	got := ChartValues(ix.Plugins[0])
	assert.Equal(t, ChartPlugin{Name: "vsphere", Image: "registry.example/stepwise-plugin-vsphere@" + digestA, Signature: ix.Plugins[0].Signature}, got)
}

func TestMergeValues(t *testing.T) {
	plugins := newKeys(t)
	vsphere := ChartValues(sample(plugins).Plugins[0])
	old := "  image: registry.example/stepwise-plugin-vsphere@" + digestB + "\n  sha256: " + digestB[7:] + "\n"
	tests := []struct {
		name         string
		values       string
		wantReplaced bool
		want         chartValues
		wantText     []string // in the output, as written
		wantAbsent   []string
		wantErr      string
	}{
		{name: "no values yet", want: chartValues{Plugins: []ChartPlugin{vsphere}},
			wantText: []string{"plugins:\n- name: vsphere\n  image: registry.example/stepwise-plugin-vsphere@" + digestA + "\n  signature:\n    publicKey: |\n      -----BEGIN PUBLIC KEY-----\n"}},
		{name: "only a comment", values: "# my cluster's values\n", want: chartValues{Plugins: []ChartPlugin{vsphere}}, wantText: []string{"# my cluster's values"}},
		{name: "other keys, no plugins", values: "# replicas\nreplicas: 3 # at least two\n",
			want: chartValues{Plugins: []ChartPlugin{vsphere}, Replicas: 3}, wantText: []string{"# replicas\nreplicas: 3 # at least two\n"}},
		{name: "a null document", values: "---\n", want: chartValues{Plugins: []ChartPlugin{vsphere}}},
		{name: "the empty list alone", values: "plugins: []\n", want: chartValues{Plugins: []ChartPlugin{vsphere}}, wantAbsent: []string{"[]"}},
		{name: "the chart's empty list", values: "plugins: []\nreplicas: 2\n", want: chartValues{Plugins: []ChartPlugin{vsphere}, Replicas: 2}},
		{name: "a null list", values: "plugins:\nreplicas: 2\n", want: chartValues{Plugins: []ChartPlugin{vsphere}, Replicas: 2}},
		{name: "another plugin", values: "plugins:\n- name: example\n  image: stepwise-plugin-example@" + digestB + "\n  sha256: " + digestB[7:] + "\n",
			want:     chartValues{Plugins: []ChartPlugin{{Name: "example", Image: "stepwise-plugin-example@" + digestB}, vsphere}},
			wantText: []string{"sha256: " + digestB[7:]}},
		{name: "the same plugin, older: replaced whole", wantReplaced: true,
			values: "replicas: 2\nplugins:\n- name: example\n  image: stepwise-plugin-example@" + digestB + "\n# vsphere, for the VMs\n- name: vsphere\n" + old + "- name: aws\n  image: aws@" + digestB + "\n",
			want: chartValues{Replicas: 2, Plugins: []ChartPlugin{
				{Name: "example", Image: "stepwise-plugin-example@" + digestB}, vsphere, {Name: "aws", Image: "aws@" + digestB}}},
			wantText: []string{"replicas: 2\nplugins:\n- name: example\n", "# vsphere, for the VMs\n- name: vsphere\n"},
			// The old entry's sha256 pinned the old binary: the chart would refuse the new one.
			wantAbsent: []string{"sha256: "}},
		{name: "a flow list over lines", values: "plugins: [\n  {name: example, image: stepwise-plugin-example}\n]\nreplicas: 2\n",
			want: chartValues{Plugins: []ChartPlugin{{Name: "example", Image: "stepwise-plugin-example"}, vsphere}, Replicas: 2}},
		{name: "an indented mapping", values: "  plugins: []\n  replicas: 2\n", want: chartValues{Plugins: []ChartPlugin{vsphere}, Replicas: 2}},
		{name: "not a mapping", values: "- a\n- b\n", wantErr: "not a mapping of keys to values"},
		{name: "plugins not a list", values: "plugins: {vsphere: {}}\n", wantErr: "the values' plugins (line 1) is not a list"},
		{name: "two documents", values: "replicas: 1\n---\nreplicas: 2\n", wantErr: "more than one YAML document"},
		{name: "not YAML", values: "plugins: [", wantErr: "read the values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, replaced, err := MergeValues([]byte(tt.values), vsphere)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantReplaced, replaced)
			var got chartValues
			require.NoError(t, yaml.Unmarshal(out, &got), string(out))
			assert.Equal(t, tt.want, got)
			for _, text := range tt.wantText {
				assert.Contains(t, string(out), text)
			}
			for _, text := range tt.wantAbsent {
				assert.NotContains(t, string(out), text)
			}
		})
	}
}

// TestMergeValuesKeepsTheChartsValues: merged into the chart's own values.yaml, every other
// key keeps its value.
func TestMergeValuesKeepsTheChartsValues(t *testing.T) {
	values, err := os.ReadFile("../../../charts/stepwise/values.yaml")
	require.NoError(t, err)
	plugin := ChartPlugin{Name: "example", Image: "registry.example/stepwise-plugin-example@" + digestA,
		Signature: signature.Policy{Identity: "a@example.com", Issuer: "https://accounts.example"}}
	out, replaced, err := MergeValues(values, plugin)
	require.NoError(t, err)
	assert.False(t, replaced)

	var before, after map[string]any
	require.NoError(t, yaml.Unmarshal(values, &before))
	require.NoError(t, yaml.Unmarshal(out, &after))
	assert.Equal(t, []any{map[string]any{"name": "example", "image": plugin.Image,
		"signature": map[string]any{"identity": "a@example.com", "issuer": "https://accounts.example"}}}, after["plugins"])
	delete(before, "plugins")
	delete(after, "plugins")
	assert.Equal(t, before, after)
	section, _, err := MergeValues(nil, plugin)
	require.NoError(t, err)
	assert.Equal(t, strings.Replace(string(values), "plugins: []\n", string(section), 1), string(out),
		"every line but plugins' is kept, comments and blank lines included")
}
