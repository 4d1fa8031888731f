package hostile

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
)

const (
	// settleTimeout bounds the wait, after the last object, for every admitted pipeline and
	// trigger to have a Ready condition for its generation.
	settleTimeout = time.Minute
	// minHostilePhase is how long, at least, the canary runs among the hostile objects,
	// so that its percentiles rest on enough samples even when the operator is quick.
	minHostilePhase = 15 * time.Second
)

// TestHostileObjects applies generated hostile objects as a tenant (namespace A) while a
// canary measures, in namespace B, how soon a one-step pipeline is Ready; then it deletes
// everything. It asserts that the operator never exited nor panicked, that the canary
// stayed fast, that every admitted pipeline and trigger was handled (templates and
// Approvals have no status), that no step that waits for approval ran without the
// approvals it requires and that no decision counted that must not, that the tenant
// reached nothing outside A, and that A could be deleted.
func TestHostileObjects(t *testing.T) {
	require.NotNil(t, cluster, "TestMain starts the cluster when this test is selected")
	seed := chooseSeed()
	repeat := func() string {
		return "go test ./test/e2e/hostile/ -run " + e2eTest + " -args -hostile.seed=" + strconv.FormatUint(seed, 10) + " -hostile.count=" + strconv.Itoa(*countFlag)
	}
	t.Logf("hostile: seed %d, %d objects; repeat with: %s", seed, *countFlag, repeat())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("hostile: failed with seed %d; repeat with: %s", seed, repeat())
		}
	})
	started := time.Now()
	ctx := t.Context()

	dir, err := CRDDir()
	require.NoError(t, err)
	schemas, err := LoadSchemas(dir)
	require.NoError(t, err)
	tn := newTenant(t, schemas)
	client, err := clientset.NewForConfig(cluster.Config)
	require.NoError(t, err)
	can := newCanary(client, tn.env.Foreign)

	// The baseline: the canary alone.
	can.runN(ctx, "alone", *baselineFlag)

	// The hostile phase: the objects, then until the operator has handled them all.
	hostileStart := time.Now()
	stopCanary := can.start(ctx, "hostile")
	out := newOutcome()
	tn.apply(ctx, t, NewGenerator(seed, schemas, tn.env), *countFlag, out)
	applied := time.Since(hostileStart)
	unhandled, byEvent, states := tn.waitHandled(ctx, settleTimeout)
	if rest := minHostilePhase - time.Since(hostileStart); rest > 0 {
		select {
		case <-time.After(rest):
		case <-ctx.Done():
		}
	}
	stopCanary()
	breaches, err := tn.breaches(ctx)
	require.NoError(t, err)
	unapproved, approvalStates, err := tn.approvalViolations(ctx)
	require.NoError(t, err)

	// The teardown, with the canary still measuring.
	stopCanary = can.start(ctx, "teardown")
	orphaned := tn.teardown(ctx, t)
	stopCanary()

	exits := 0
	select {
	case <-operator.Exited():
		exits = 1
	default:
	}
	generated, admitted, refused := out.totals()
	alone, hostile, teardown := can.latencies("alone"), can.latencies("hostile"), can.latencies("teardown")
	misses := append(append(can.missed("alone"), can.missed("hostile")...), can.missed("teardown")...)
	t.Logf("hostile: seed=%d objects=%d admitted=%d refused=%d [%s]; updates=%d (%d refused) deletes=%d largest-admitted=%dB; "+
		"operator-exits=%d; canary alone[%s] hostile[%s] teardown[%s] misses=%d; unhandled=%d (handled by an Event only: %d) breaches=%d orphaned=%d; applied in %s, wall %s",
		seed, generated, admitted, refused, out.refusals(), out.updates, out.updatesRefused, out.deletes, out.largestAdmitted,
		exits, alone, hostile, teardown, len(misses), len(unhandled), byEvent, len(breaches), orphaned,
		applied.Round(time.Millisecond), time.Since(started).Round(time.Second))
	t.Logf("hostile: what the operator made of the admitted objects: %s", countsString(states))
	t.Logf("hostile: steps that wait for approval, by phase: %s", countsString(approvalStates))
	for _, s := range out.surprises {
		// The API server's own failures: worth reading, not the operator's doing.
		t.Logf("hostile: the API server failed on an object: %s", s)
	}

	assert.Zero(t, exits, "the operator exited (log: %s)", operator.Log)
	lines, err := panicLines(operator.Log)
	require.NoError(t, err)
	assert.Empty(t, lines, "the operator's log (%s) tells of a panic", operator.Log)
	// Every pipeline is archived as it finishes and as it is deleted: a hostile object the
	// archive refused would hold its deletion (orphaned above) and say so in the log.
	archiveErrors, err := grepLog(operator.Log, "archive pipeline")
	require.NoError(t, err)
	assert.Empty(t, archiveErrors, "the archive refused hostile pipelines' records (log: %s)", operator.Log)
	assert.Empty(t, misses, "canary pipelines not Ready within %s", can.deadline)
	assert.LessOrEqual(t, hostile.percentile(0.99), *p99Flag, "canary p99 among hostile objects (alone: %s)", alone)
	assert.LessOrEqual(t, teardown.percentile(0.99), *p99Flag, "canary p99 during the teardown (alone: %s)", alone)
	if !assert.Empty(t, unhandled, "admitted objects without a Ready condition for their generation %s after the last was applied", settleTimeout) {
		for _, u := range unhandled {
			kind, rest, _ := strings.Cut(u, " ")
			name, _, _ := strings.Cut(rest, " ")
			if d, ok := out.described[kind+" "+name]; ok {
				t.Logf("hostile: unhandled %s %s was generated as %s", kind, name, d)
			}
		}
	}
	assert.Empty(t, breaches, "the tenant reached outside its namespace")
	assert.Empty(t, unapproved, "steps that ran without the approvals they require, or decisions that counted though they must not")
	assert.Positive(t, admitted, "no object was admitted: the generator tests admission only")
}

// grepLog returns the lines of a log that contain substr (at most 20).
func grepLog(path, substr string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, substr) && len(out) < 20 {
			out = append(out, line)
		}
	}
	return out, nil
}

// panicLines are the lines of the operator's log that tell of a panic, recovered or not
// (at most 20).
func panicLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for s.Scan() && len(out) < 20 {
		line := s.Text()
		if strings.Contains(strings.ToLower(line), "panic") || strings.Contains(line, "Observed a panic") {
			out = append(out, shorten(line, 500))
		}
	}
	return out, s.Err()
}
