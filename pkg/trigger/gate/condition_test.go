package gate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// object is an object as unstructured.Unstructured holds it: JSON maps and lists.
func object(kind, name string, status map[string]any) map[string]any {
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "default"},
	}
	if status != nil {
		obj["status"] = status
	}
	return obj
}

// withConditions is a status of the given conditions, each "Type=Status".
func withConditions(conds ...string) map[string]any {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		typ, st, _ := strings.Cut(c, "=")
		list = append(list, map[string]any{"type": typ, "status": st, "reason": "Test", "lastTransitionTime": "2026-11-26T08:00:00Z"})
	}
	return map[string]any{"conditions": list, "observedGeneration": int64(3)}
}

// nodes is n Nodes of which the first ready are Ready.
func nodes(n, ready int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		st := "False"
		if i < ready {
			st = "True"
		}
		out[i] = object("Node", fmt.Sprintf("node-%d", i), withConditions("MemoryPressure=False", "DiskPressure=False", "PIDPressure=False", "Ready="+st))
	}
	return out
}

func configMap(name string, data map[string]any) map[string]any {
	obj := object("ConfigMap", name, nil)
	obj["data"] = data
	return obj
}

const (
	deploymentsAvailable = `objects.all(d, d.status.conditions.exists(c, c.type == 'Available' && c.status == 'True'))`
	nodesReady95         = `objects.filter(n, n.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')).size() * 100 >= objects.size() * 95`
	flagHealthy          = `objects.all(c, c.data.healthy == 'true')`
)

func TestCondition(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		objects []map[string]any
		want    bool
		wantErr string
	}{
		{name: "every Deployment Available", expr: deploymentsAvailable, objects: []map[string]any{
			object("Deployment", "web", withConditions("Progressing=True", "Available=True")),
			object("Deployment", "api", withConditions("Available=True")),
		}, want: true},
		{name: "a Deployment unavailable", expr: deploymentsAvailable, objects: []map[string]any{
			object("Deployment", "web", withConditions("Progressing=True", "Available=True")),
			object("Deployment", "api", withConditions("Progressing=True", "Available=False")),
		}, want: false},
		{name: "19 of 20 Nodes Ready: 95 %", expr: nodesReady95, objects: nodes(20, 19), want: true},
		{name: "18 of 20 Nodes Ready: 90 %", expr: nodesReady95, objects: nodes(20, 18), want: false},
		{name: "all() over no objects", expr: deploymentsAvailable, objects: nil, want: true},
		{name: "exists() over no objects", expr: `objects.exists(o, true)`, objects: []map[string]any{}, want: false},
		{name: "ConfigMap flag set", expr: flagHealthy, objects: []map[string]any{configMap("gate", map[string]any{"healthy": "true"})}, want: true},
		{name: "ConfigMap flag unset", expr: flagHealthy, objects: []map[string]any{configMap("gate", map[string]any{"healthy": "false"})}, want: false},
		{name: "has() guards a missing status", expr: `objects.all(d, has(d.status) && d.status.observedGeneration >= 3)`,
			objects: []map[string]any{object("Deployment", "new", nil)}, want: false},
		{name: "a number from JSON", expr: `objects.all(d, d.status.observedGeneration == 3)`,
			objects: []map[string]any{object("Deployment", "web", withConditions())}, want: true},
		{name: "dyn output that is a bool", expr: `objects[0].data.healthy == 'true' ? objects[0].data.ok : false`,
			objects: []map[string]any{configMap("gate", map[string]any{"healthy": "true", "ok": true})}, want: true},

		{name: "dyn output that is a string", expr: `objects[0].data.healthy`,
			objects: []map[string]any{configMap("gate", map[string]any{"healthy": "true"})}, wantErr: "condition must give a bool, gives string"},
		{name: "a missing field", expr: deploymentsAvailable, objects: []map[string]any{object("Deployment", "new", nil)},
			wantErr: "evaluate condition: no such key: status"},
		{name: "an index out of range", expr: `objects[0].kind == 'Node'`, objects: nil, wantErr: "evaluate condition: index out of bounds: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CompileCondition(tt.expr)
			require.NoError(t, err)
			got, err := c.Holds(context.Background(), tt.objects)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.False(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestCompileConditionRefuses(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		wantErr string
	}{
		{name: "empty", expr: "  ", wantErr: "condition is empty"},
		{name: "an int", expr: `objects.size()`, wantErr: "condition must give a bool, gives int"},
		{name: "a list", expr: `objects.map(o, o.metadata.name)`, wantErr: "condition must give a bool, gives list(dyn)"},
		{name: "a syntax error", expr: `objects.all(o, `, wantErr: "condition does not compile: ERROR: <input>:1:"},
		{name: "an undeclared variable", expr: `pods.all(p, true)`, wantErr: "condition does not compile: ERROR: <input>:1:1: undeclared reference to 'pods'"},
		{name: "too long", expr: "true" + strings.Repeat(" && true", 512), wantErr: "condition is 4100 characters long, over the limit of 4096"},
		{name: "too long in characters, not bytes", expr: "'" + strings.Repeat("é", 4095) + "' != ''", wantErr: "over the limit of 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CompileCondition(tt.expr)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.LessOrEqual(t, len(err.Error()), len("condition does not compile: ")+maxErrorText)
		})
	}
}

// TestCompileConditionLongIssues trims CEL's issues, which quote the expression, to
// maxErrorText bytes.
func TestCompileConditionLongIssues(t *testing.T) {
	expr := strings.Repeat("nope && ", 400) + "true"
	_, err := CompileCondition(expr)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "condition does not compile: ERROR: "), err.Error())
	assert.True(t, strings.HasSuffix(err.Error(), "..."), err.Error())
	assert.Len(t, err.Error(), len("condition does not compile: ")+maxErrorText)
}

// TestConditionCostLimit stops expressions that grow with a power of the number of
// objects at MaxConditionCost, with an error that names the limit, long before they
// would end (three nested all() over 300 objects is 27 million iterations).
func TestConditionCostLimit(t *testing.T) {
	objects := nodes(300, 300)
	tests := []struct {
		name string
		expr string
		// slowUnderRace: under the race detector it takes 10 s or more to reach the
		// limit, and the test's deadline stops it first.
		slowUnderRace bool
	}{
		{name: "three nested all()", expr: `objects.all(a, objects.all(b, objects.all(c, true)))`, slowUnderRace: true},
		{name: "lists of lists", expr: `objects.map(a, objects.map(b, objects.map(c, c.metadata.name))).size() > 0`},
		{name: "concatenated names", expr: `objects.map(a, objects.map(b, a.metadata.name + '/' + b.metadata.name + '/' + a.status.conditions[0].lastTransitionTime)).size() > 0`},
		{name: "every condition against every other", expr: `objects.all(a, a.status.conditions.all(x, objects.all(b, b.status.conditions.all(y, x.type != 'Nope'))))`, slowUnderRace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CompileCondition(tt.expr)
			require.NoError(t, err)
			ctx := context.Background()
			if raceDetector {
				// Cost tracking is about twenty times slower under the race detector: the
				// slow ones take 10 s or more to reach the limit, and a short deadline stops
				// them first (as the trigger's does); the others reach it in about 2 s, well
				// within a long one on a busy machine.
				deadline := 15 * time.Second
				if tt.slowUnderRace {
					deadline = 2 * time.Second
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			start := time.Now()
			got, err := c.Holds(ctx, objects)
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.False(t, got)
			if raceDetector && tt.slowUnderRace {
				assert.Regexp(t, `evaluate condition: (cost over the limit of \d+|.*deadline)`, err.Error())
				return
			}
			assert.Contains(t, err.Error(), fmt.Sprintf("evaluate condition: cost over the limit of %d", MaxConditionCost))
			if !raceDetector {
				// Under a second here; generous for a busy machine.
				assert.Less(t, elapsed, 4*time.Second)
			}
		})
	}
}

// TestConditionContext stops an evaluation when its context ends, and says so. The
// expression is one the cost limit does not stop soon: filter() with a constant
// predicate is charged almost nothing per iteration (27 million of them here).
func TestConditionContext(t *testing.T) {
	c, err := CompileCondition(`objects.filter(a, objects.filter(b, objects.filter(c, false).size() > 0).size() > 0).size() > 0`)
	require.NoError(t, err)
	objects := nodes(300, 300)

	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := c.Holds(ctx, objects)
		require.Error(t, err)
		assert.False(t, got)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "evaluate condition: operation interrupted")
	})
	t.Run("the caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Holds(ctx, objects)
		elapsed := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, elapsed, time.Second)
	})
	t.Run("no deadline: the default", func(t *testing.T) {
		short := *c
		short.defaultTimeout = 100 * time.Millisecond
		start := time.Now()
		_, err := short.Holds(context.Background(), objects)
		elapsed := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "over the default time limit of 100ms")
		assert.Less(t, elapsed, time.Second)
	})
}

// TestConditionConcurrent evaluates one condition from many goroutines (run with -race).
func TestConditionConcurrent(t *testing.T) {
	c, err := CompileCondition(nodesReady95)
	require.NoError(t, err)
	ready, notReady := nodes(20, 19), nodes(20, 18)
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			objects, want := ready, true
			if i%2 == 1 {
				objects, want = notReady, false
			}
			got, err := c.Holds(context.Background(), objects)
			if err == nil && got != want {
				err = fmt.Errorf("goroutine %d: got %v, want %v", i, got, want)
			}
			errs <- err
		}()
	}
	for range 16 {
		assert.NoError(t, <-errs)
	}
}
