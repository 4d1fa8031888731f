package gate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConditionMetadataOnly: a condition reads only metadata when every object it
// reaches, through `objects`, an index, a comprehension's variable or a filter(), is used
// by its metadata alone; any other use of an object, however it is spelt, reads more.
func TestConditionMetadataOnly(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want bool
	}{
		{"count", `objects.size() > 3`, true},
		{"size as a function", `size(objects) > 3`, true},
		{"all over a label", `objects.all(o, o.metadata.labels.pool == 'web')`, true},
		{"has metadata", `objects.all(o, has(o.metadata.annotations) && 'team' in o.metadata.annotations)`, true},
		{"exists_one over names", `objects.exists_one(o, o.metadata.name == 'a')`, true},
		{"filter then count", `objects.filter(o, o.metadata.labels.pool == 'web').size() * 100 >= objects.size() * 95`, true},
		{"filter of a filter", `objects.filter(o, has(o.metadata.labels)).filter(p, p.metadata.labels.a == 'b').size() == 1`, true},
		{"index then metadata", `objects.size() == 0 || objects[0].metadata.name == 'a'`, true},
		{"index of a filter then metadata", `objects.filter(o, true)[0].metadata.name == 'a'`, true},
		{"map of names", `objects.map(o, o.metadata.name).exists(n, n == 'a')`, true},
		{"map with a filter of names", `objects.map(o, o.metadata.name != 'b', o.metadata.name).size() == 1`, true},
		{"nested over the same list", `objects.all(o, objects.exists(p, p.metadata.name == o.metadata.name))`, true},
		{"a local named objects", `[1, 2].all(objects, objects > 0)`, true},
		{"a root-scoped objects counted", `.objects.size() > 0`, true},
		{"a metadata map iterated", `objects.all(o, o.metadata.labels.all(k, k != 'x'))`, true},

		{"status", `objects.all(o, o.status.phase == 'Running')`, false},
		{"has status", `objects.all(o, has(o.status))`, false},
		{"data by index", `objects[0].data.x == 'y'`, false},
		{"kind", `objects.all(o, o.kind == 'ConfigMap')`, false},
		{"filter over data", `objects.filter(o, o.data.ready == 'true').size() > 0`, false},
		{"a filter's objects read after", `objects.filter(o, true).all(p, p.spec.replicas > 0)`, false},
		{"map of whole objects", `objects.map(o, o).all(p, p.spec.x == 1)`, false},
		{"an object in a list", `objects.all(o, [o][0].spec.x == 1)`, false},
		{"an object in a map", `objects.all(o, {'k': o}.k.spec.x == 1)`, false},
		{"an object converted to dyn", `objects.all(o, dyn(o).spec.x == 1)`, false},
		{"an object's field count", `objects.all(o, o.size() == 4)`, false},
		{"a field tested on an object", `objects.all(o, 'spec' in o)`, false},
		{"an object's fields iterated", `objects.all(o, o.exists(k, k == 'spec'))`, false},
		{"objects compared", `objects.exists(o, o == objects[0])`, false},
		{"objects compared as lists", `objects == objects`, false},
		{"membership", `objects[0] in objects`, false},
		{"objects concatenated", `(objects + objects).size() > 0`, false},
		{"a conditional over objects", `(true ? objects : [])[0].spec.x == 1`, false},
		{"a root-scoped objects", `.objects.all(o, o.spec.x == 1)`, false},
		{"the type of the list", `objects.all(o, has(o.metadata)) && type(objects) == list`, false},
		{"a root-scoped objects beside a local one", `[1].all(objects, .objects[0].spec.x == 1)`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CompileCondition(tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.MetadataOnly())
		})
	}
}

// TestAMetadataOnlyConditionGivesTheSameOverMetadata: what MetadataOnly promises, on
// objects with and without everything but their metadata.
func TestAMetadataOnlyConditionGivesTheSameOverMetadata(t *testing.T) {
	whole := []map[string]any{
		configMap("a", map[string]any{"healthy": "true"}),
		configMap("b", map[string]any{"healthy": "false"}),
	}
	metadataOnly := make([]map[string]any, len(whole))
	for i, obj := range whole {
		metadataOnly[i] = map[string]any{"metadata": obj["metadata"]}
	}
	for _, expr := range []string{
		`objects.filter(o, o.metadata.name == 'a').size() == 1`,
		`objects.all(o, o.metadata.namespace == 'default')`,
		`objects.map(o, o.metadata.name) == ['a', 'b']`,
		`objects.size() == 3`,
	} {
		c, err := CompileCondition(expr)
		require.NoError(t, err)
		require.True(t, c.MetadataOnly(), expr)
		want, err := c.Holds(context.Background(), whole)
		require.NoError(t, err)
		got, err := c.Holds(context.Background(), metadataOnly)
		require.NoError(t, err)
		assert.Equal(t, want, got, expr)
	}
}
