package archive

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/internal/pgtest"
	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// server is the package's one PostgreSQL server; each test takes a database of its own.
var server *pgtest.Server

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "archive-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	server, err = pgtest.Launch(ctx, pgtest.Options{Dir: dir})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := server.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// newStore opens a store on a fresh database.
func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), server.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// at is a time the database keeps as it is: PostgreSQL keeps microseconds.
func at(minute int) time.Time {
	return time.Date(2026, 12, 1, 10, minute, 0, 123456000, time.UTC)
}

// rec is a record of pipeline p-<i> in namespace ns.
func rec(ns string, i int) Record {
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	r := Record{
		UID:        uid,
		Generation: 1,
		State:      v1alpha1.ArchiveSucceeded,
		Namespace:  ns,
		Pipeline:   fmt.Sprintf("p-%d", i),
		Phase:      "Succeeded",
		Labels:     map[string]string{"app": "retire"},
		Created:    at(0),
		Finished:   at(i),
		Body:       fmt.Appendf(nil, `{"metadata": {"name": "p-%d"},  "spec": {}}`, i),
	}
	r.Name = historyv1alpha1.RecordName(r.Pipeline, r.UID, r.Generation, r.State)
	return r
}

func put(t *testing.T, s *Store, rs ...Record) {
	t.Helper()
	for _, r := range rs {
		inserted, err := s.Put(t.Context(), r)
		require.NoError(t, err)
		require.True(t, inserted, r.Name)
	}
}

func count(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func names(rs []Record) []string {
	var out []string // nil for none, as the tests' want lists
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestRecordName(t *testing.T) {
	long := strings.Repeat("a", 250)
	for _, tc := range []struct {
		pipeline, uid string
		generation    int64
		state         State
		want          string
	}{
		{"retire-n1", "3f2a9c01-77d4-4c1e-9a53-0d6e1b2c3d4e", 1, v1alpha1.ArchiveSucceeded, "retire-n1.3f2a9c01.1.succeeded"},
		{"retire-n1", "3F2A9C01-77D4-4C1E-9A53-0D6E1B2C3D4E", 12, v1alpha1.ArchiveFailed, "retire-n1.3f2a9c01.12.failed"},
		{"p", "3f2a-9c01-77d4", 3, v1alpha1.ArchiveOrphaned, "p.3f2a9c01.3.orphaned"},
		{"p", "abc", 0, v1alpha1.ArchiveRemoved, "p.abc.0.removed"},
		{"p", "", 2, v1alpha1.ArchiveDeleted, "p..2.deleted"},
		{long, "3f2a9c01-77d4", 1, v1alpha1.ArchiveSucceeded, strings.Repeat("a", 253-len(".3f2a9c01.1.succeeded")) + ".3f2a9c01.1.succeeded"},
		{strings.Repeat("a", 231) + "-b.c", "3f2a9c01", 1, v1alpha1.ArchiveSucceeded, strings.Repeat("a", 231) + ".3f2a9c01.1.succeeded"},
	} {
		t.Run(tc.want[max(0, len(tc.want)-30):], func(t *testing.T) {
			got := historyv1alpha1.RecordName(tc.pipeline, tc.uid, tc.generation, tc.state)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), 253)
		})
	}
}

func TestPutGet(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	r := rec("ns", 1)
	r.Trigger, r.Object, r.Creator = "node-retire", "n1", "alice"
	r.Labels = map[string]string{"app": "retire", "stepwise.dev/trigger": "node-retire"}
	before := time.Now()

	inserted, err := s.Put(ctx, r)
	require.NoError(t, err)
	assert.True(t, inserted)
	// A writer killed after Put puts again: nothing new.
	again := r
	again.Phase = "Changed"
	inserted, err = s.Put(ctx, again)
	require.NoError(t, err)
	assert.False(t, inserted)
	assert.Equal(t, 1, count(t, s, "pipeline_records"))

	got, err := s.Get(ctx, "ns", r.Name)
	require.NoError(t, err)
	assert.WithinRange(t, got.Archived, before.Add(-time.Minute), time.Now().Add(time.Minute))
	assert.Equal(t, time.UTC, got.Archived.Location())
	want := r
	want.Archived = got.Archived
	assert.Equal(t, want, got, "the first Put's record, Body byte for byte")

	_, err = s.Get(ctx, "ns", "absent")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Get(ctx, "other", r.Name)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorContains(t, err, "archive: get record other/"+r.Name)
}

func TestPutFillsNameAndDefaults(t *testing.T) {
	s := newStore(t)
	r := rec("ns", 1)
	r.Name, r.Labels, r.Body = "", nil, nil
	put(t, s, r)
	got, err := s.Get(t.Context(), "ns", historyv1alpha1.RecordName(r.Pipeline, r.UID, 1, v1alpha1.ArchiveSucceeded))
	require.NoError(t, err)
	assert.Empty(t, got.Labels)
	assert.Empty(t, got.Body)
}

func TestPutRefuses(t *testing.T) {
	s := newStore(t)
	taken := rec("ns", 1)
	put(t, s, taken)
	// Another pipeline of the same name whose UID starts alike: same record name.
	clash := rec("ns", 1)
	clash.UID = taken.UID[:8] + "-ffff-4000-8000-000000000000"

	for _, tc := range []struct {
		name   string
		modify func(*Record)
		is     error
		says   string
	}{
		{"body over MaxBodyBytes", func(r *Record) { r.Body = make([]byte, MaxBodyBytes+1) }, ErrBodyTooLarge, "4194305 bytes"},
		{"no UID", func(r *Record) { r.UID = "" }, nil, "required"},
		{"no namespace", func(r *Record) { r.Namespace = "" }, nil, "required"},
		{"unknown state", func(r *Record) { r.State = "Gone" }, nil, `unknown state "Gone"`},
		{"name of another pipeline's record", func(r *Record) { *r = clash }, nil, "the name is taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rec("ns", 2)
			tc.modify(&r)
			inserted, err := s.Put(t.Context(), r)
			assert.False(t, inserted)
			require.ErrorContains(t, err, tc.says)
			assert.ErrorContains(t, err, "archive: put record ")
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
	assert.Equal(t, 1, count(t, s, "pipeline_records"))

	// The largest body allowed goes in.
	r := rec("ns", 3)
	r.Body = make([]byte, MaxBodyBytes)
	put(t, s, r)
}

func TestPutCleansText(t *testing.T) {
	s := newStore(t)
	r := rec("ns", 1)
	r.Phase, r.Creator = "Fai\x00led", "bad \xff utf8"
	put(t, s, r)
	got, err := s.Get(t.Context(), "ns", r.Name)
	require.NoError(t, err)
	assert.Equal(t, "Failed", got.Phase)
	assert.Equal(t, "bad \uFFFD utf8", got.Creator)
}

func TestHas(t *testing.T) {
	s := newStore(t)
	r := rec("ns", 1)
	put(t, s, r)
	for _, tc := range []struct {
		uid        string
		generation int64
		state      State
		want       bool
	}{
		{r.UID, 1, v1alpha1.ArchiveSucceeded, true},
		{r.UID, 2, v1alpha1.ArchiveSucceeded, false},
		{r.UID, 1, v1alpha1.ArchiveDeleted, false},
		{"other", 1, v1alpha1.ArchiveSucceeded, false},
	} {
		has, err := s.Has(t.Context(), tc.uid, tc.generation, tc.state)
		require.NoError(t, err)
		assert.Equal(t, tc.want, has, "%s %d %s", tc.uid, tc.generation, tc.state)
	}
}

func TestListPages(t *testing.T) {
	s := newStore(t)
	var want []string
	for i := range 25 {
		r := rec("a", i)
		put(t, s, r, rec("b", 100+i))
		want = append(want, r.Name)
	}
	for _, tc := range []struct {
		limit int64
		pages int
	}{{10, 3}, {5, 5}, {25, 1}, {100, 1}, {0, 1}, {1, 25}} {
		t.Run(fmt.Sprint("limit ", tc.limit), func(t *testing.T) {
			var got []string
			o := ListOptions{Namespace: "a", Limit: tc.limit}
			for page := 1; ; page++ {
				require.LessOrEqual(t, page, tc.pages)
				res, err := s.List(t.Context(), o)
				require.NoError(t, err)
				if tc.limit > 0 {
					assert.LessOrEqual(t, int64(len(res.Records)), tc.limit)
				}
				got = append(got, names(res.Records)...)
				if res.Continue == "" {
					assert.Equal(t, tc.pages, page)
					break
				}
				o.Continue = res.Continue
			}
			assert.Equal(t, want, got, "every record once, in the order archived")
		})
	}
	all, err := s.List(t.Context(), ListOptions{})
	require.NoError(t, err)
	assert.Len(t, all.Records, 50)
	assert.Empty(t, all.Continue)

	_, err = s.List(t.Context(), ListOptions{Limit: -1})
	assert.ErrorContains(t, err, "negative limit")
}

func TestPutBatchWritesEachOnce(t *testing.T) {
	s := newStore(t)
	var batch []Record
	for i := range 20 {
		batch = append(batch, rec("batch", i))
	}
	n, err := s.PutBatch(t.Context(), batch)
	require.NoError(t, err)
	assert.Equal(t, 20, n)
	n, err = s.PutBatch(t.Context(), append(batch[:5:5], rec("batch", 20)))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "the records it has stay; only the new one is written")
	all, err := s.List(t.Context(), ListOptions{Namespace: "batch"})
	require.NoError(t, err)
	assert.Len(t, all.Records, 21)

	bad := rec("batch", 30)
	bad.State = "Exploded"
	_, err = s.PutBatch(t.Context(), []Record{rec("batch", 31), bad})
	require.ErrorContains(t, err, "unknown state")
	has, err := s.Has(t.Context(), rec("batch", 31).UID, 1, v1alpha1.ArchiveSucceeded)
	require.NoError(t, err)
	assert.False(t, has, "a batch with a bad record writes nothing")
}

func TestListPagesAreBoundedInBytes(t *testing.T) {
	s := newStore(t)
	var want []string
	for i := range 5 {
		r := rec("bytes", i)
		r.Body = []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
		put(t, s, r)
		want = append(want, r.Name)
	}
	var got []string
	pages := 0
	o := ListOptions{Namespace: "bytes", MaxBytes: 2500}
	for {
		res, err := s.List(t.Context(), o)
		require.NoError(t, err)
		pages++
		assert.LessOrEqual(t, len(res.Records), 2, "two bodies of about 1 KB fit 2,500 bytes, a third does not")
		got = append(got, names(res.Records)...)
		if res.Continue == "" {
			break
		}
		o.Continue = res.Continue
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 3, pages)

	one, err := s.List(t.Context(), ListOptions{Namespace: "bytes", MaxBytes: 10})
	require.NoError(t, err)
	assert.Len(t, one.Records, 1, "a page holds at least one record, however large")
	assert.NotEmpty(t, one.Continue)
}

// TestListUsesIndex: a namespace's pages walk (namespace, id), whatever the table's
// size (sequential scans off, so that a small table's plan says what a big one's would).
func TestListUsesIndex(t *testing.T) {
	s := newStore(t)
	put(t, s, rec("a", 1), rec("b", 2))
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), "SET enable_seqscan = off")
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), "RESET enable_seqscan") }()
	stmt, _, err := listQuery(ListOptions{Namespace: "a", Limit: 10, Continue: encodeContinue(1)})
	require.NoError(t, err)
	rows, err := conn.Query(t.Context(), "EXPLAIN "+stmt.sql, stmt.args...)
	require.NoError(t, err)
	var plan strings.Builder
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	assert.Contains(t, plan.String(), "pipeline_records_namespace_id", plan.String())
	assert.NotContains(t, plan.String(), "Sort", "rows come in id order from the index")
}

func TestListNamespaces(t *testing.T) {
	s := newStore(t)
	put(t, s, rec("a", 1), rec("b", 2), rec("a", 3), rec("c", 4))
	for _, tc := range []struct {
		namespace string
		want      []string
	}{
		{"a", []string{rec("a", 1).Name, rec("a", 3).Name}},
		{"b", []string{rec("b", 2).Name}},
		{"none", nil},
		{"", []string{rec("a", 1).Name, rec("b", 2).Name, rec("a", 3).Name, rec("c", 4).Name}},
	} {
		res, err := s.List(t.Context(), ListOptions{Namespace: tc.namespace})
		require.NoError(t, err)
		assert.Equal(t, tc.want, names(res.Records), "namespace %q", tc.namespace)
		for _, r := range res.Records {
			if tc.namespace != "" {
				assert.Equal(t, tc.namespace, r.Namespace)
			}
		}
	}
}

// TestListLabels checks each operator against Kubernetes' own matching of the same
// selector on the same labels.
func TestListLabels(t *testing.T) {
	s := newStore(t)
	sets := []map[string]string{
		{"env": "prod", "tier": "3"},
		{"env": "dev", "tier": "1"},
		{"env": "staging"},
		{"team": "a", "tier": "x"},
		{},
		nil,
		{"env": "prod", "team": "b", "tier": "10"},
	}
	var recs []Record
	for i, l := range sets {
		r := rec("ns", i)
		r.Labels = l
		recs = append(recs, r)
		put(t, s, r)
	}
	for _, sel := range []string{
		"env=prod", "env==prod", "env!=prod", "env in (prod,dev)", "env notin (prod,dev)",
		"env", "!env", "tier>2", "tier<3", "env=prod,team", "env,!team", "env in (prod),tier>5",
		"env=nothing", "", "team notin (a)",
	} {
		t.Run(sel, func(t *testing.T) {
			selector, err := labels.Parse(sel)
			require.NoError(t, err)
			var want []string
			for _, r := range recs {
				if selector.Matches(labels.Set(r.Labels)) {
					want = append(want, r.Name)
				}
			}
			res, err := s.List(t.Context(), ListOptions{Labels: selector})
			require.NoError(t, err)
			assert.Equal(t, want, names(res.Records))
		})
	}
	for name, sel := range map[string]labels.Selector{"nil": nil, "Everything": labels.Everything(), "Nothing": labels.Nothing()} {
		t.Run(name, func(t *testing.T) {
			res, err := s.List(t.Context(), ListOptions{Labels: sel})
			require.NoError(t, err)
			if name == "Nothing" {
				assert.Empty(t, res.Records)
			} else {
				assert.Len(t, res.Records, len(recs))
			}
		})
	}
}

// TestListHostile: values are arguments, never SQL: a label, a label key and a field
// holding SQL match literally and harm nothing.
func TestListHostile(t *testing.T) {
	s := newStore(t)
	const hostile = `x'); DROP TABLE pipeline_records; --`
	r := rec("ns", 1)
	r.Labels = map[string]string{"note": hostile, hostile: "v"}
	r.Object = hostile
	put(t, s, r, rec("ns", 2))
	for name, o := range map[string]ListOptions{
		"label value": {Labels: labels.SelectorFromValidatedSet(labels.Set{"note": hostile})},
		"label key":   {Labels: labels.SelectorFromValidatedSet(labels.Set{hostile: "v"})},
		"field":       {Fields: map[string]string{"object": hostile}},
		"namespace":   {Namespace: hostile},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := s.List(t.Context(), o)
			require.NoError(t, err)
			if name == "namespace" {
				assert.Empty(t, res.Records)
			} else {
				assert.Equal(t, []string{r.Name}, names(res.Records))
			}
		})
	}
	got, err := s.Get(t.Context(), "ns", r.Name)
	require.NoError(t, err)
	assert.Equal(t, hostile, got.Labels["note"])
	assert.Equal(t, 2, count(t, s, "pipeline_records"))
}

func TestListFields(t *testing.T) {
	s := newStore(t)
	a, b := rec("ns", 1), rec("ns", 2)
	a.Trigger, a.Object = "node-retire", "n1"
	b.State, b.Phase = v1alpha1.ArchiveFailed, "Failed"
	b.Name = historyv1alpha1.RecordName(b.Pipeline, b.UID, b.Generation, b.State)
	put(t, s, a, b)
	for _, tc := range []struct {
		fields map[string]string
		want   []string
	}{
		{map[string]string{"metadata.name": a.Name}, []string{a.Name}},
		{map[string]string{"pipeline.name": "p-2"}, []string{b.Name}},
		{map[string]string{"state": "Failed"}, []string{b.Name}},
		{map[string]string{"phase": "Succeeded"}, []string{a.Name}},
		{map[string]string{"trigger": "node-retire"}, []string{a.Name}},
		{map[string]string{"object": "n1"}, []string{a.Name}},
		{map[string]string{"trigger": ""}, []string{b.Name}},
		{map[string]string{"object": "n1", "state": "Failed"}, nil},
		{map[string]string{"state": "Succeeded", "pipeline.name": "p-1"}, []string{a.Name}},
	} {
		res, err := s.List(t.Context(), ListOptions{Fields: tc.fields})
		require.NoError(t, err)
		assert.Equal(t, tc.want, names(res.Records), "%v", tc.fields)
	}
	_, err := s.List(t.Context(), ListOptions{Fields: map[string]string{"spec.steps": "x"}})
	assert.ErrorIs(t, err, ErrUnsupportedField)
	assert.ErrorContains(t, err, `"spec.steps"`)
}

func TestListFinished(t *testing.T) {
	s := newStore(t)
	for i := 1; i <= 5; i++ { // finished at(1) .. at(5)
		put(t, s, rec("ns", i))
	}
	for _, tc := range []struct {
		after, before time.Time
		want          []int
	}{
		{at(2), time.Time{}, []int{3, 4, 5}},
		{time.Time{}, at(2), []int{1}},
		{at(1), at(5), []int{2, 3, 4}},
		{at(2).Add(-time.Microsecond), at(2).Add(time.Microsecond), []int{2}},
		{at(5), time.Time{}, nil},
		{time.Time{}, time.Time{}, []int{1, 2, 3, 4, 5}},
	} {
		res, err := s.List(t.Context(), ListOptions{FinishedAfter: tc.after, FinishedBefore: tc.before})
		require.NoError(t, err)
		var want []string
		for _, i := range tc.want {
			want = append(want, rec("ns", i).Name)
		}
		assert.Equal(t, want, names(res.Records), "after %s before %s", tc.after, tc.before)
	}
}

func TestListBadContinue(t *testing.T) {
	s := newStore(t)
	b64 := base64.RawURLEncoding.EncodeToString
	for _, token := range []string{"not base64!", b64([]byte("abc")), b64([]byte("-1")), b64([]byte("0")), b64([]byte("99999999999999999999"))} {
		_, err := s.List(t.Context(), ListOptions{Continue: token})
		assert.ErrorIs(t, err, ErrBadContinue, token)
	}
}

// TestConcurrentOpen: replicas starting at once on an empty database migrate once, one
// at a time: while the migration lock is held (here by the test), none gets through.
func TestConcurrentOpen(t *testing.T) {
	dsn := server.NewDatabase(t)
	holder, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = holder.Close(context.Background()) }()
	_, err = holder.Exec(t.Context(), "SELECT pg_advisory_lock($1)", migrationLock)
	require.NoError(t, err)

	const replicas = 3
	errs := make(chan error, replicas)
	for range replicas {
		go func() {
			s, err := Open(t.Context(), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	select {
	case err := <-errs:
		t.Fatalf("Open returned while another held the migration lock: %v", err)
	case <-time.After(1500 * time.Millisecond): // more than one of goose's lock retries
	}
	_, err = holder.Exec(t.Context(), "SELECT pg_advisory_unlock($1)", migrationLock)
	require.NoError(t, err)
	for range replicas {
		require.NoError(t, <-errs)
	}

	s, err := Open(t.Context(), dsn)
	require.NoError(t, err)
	defer s.Close()
	var applied int
	require.NoError(t, s.pool.QueryRow(t.Context(),
		"SELECT count(*) FROM "+versionTable+" WHERE version_id = 1").Scan(&applied))
	assert.Equal(t, 1, applied)
	put(t, s, rec("ns", 1))
}

func TestOpenFails(t *testing.T) {
	_, err := Open(t.Context(), "postgres://u:secret@127.0.0.1:bad/x")
	require.ErrorContains(t, err, "archive: parse dsn")
	assert.NotContains(t, err.Error(), "secret")

	// Nothing listens on a port just freed by a stopped server.
	short, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = Open(short, "postgres://stepwise@127.0.0.1:1/stepwise?sslmode=disable&connect_timeout=2")
	assert.ErrorContains(t, err, "archive: migrate schema in 127.0.0.1/stepwise")
}

func TestEvents(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	require.NoError(t, s.AddEvents(ctx, nil))
	added := []Event{
		{PipelineUID: "u1", Type: "Normal", Reason: "Started", Message: "second", Time: at(2), Count: 1},
		{PipelineUID: "u1", Type: "Normal", Reason: "Created", Message: "first", Time: at(1), Count: 1},
		{PipelineUID: "u2", Type: "Warning", Reason: "Other", Message: "other pipeline", Time: at(0), Count: 3},
		{PipelineUID: "u1", Type: "Warning", Reason: "StepFailed", Message: "third\x00", Time: at(3), Count: 2},
		{PipelineUID: "u1", Type: "Normal", Reason: "Tie", Message: "fourth, same time as third", Time: at(3), Count: 1},
	}
	require.NoError(t, s.AddEvents(ctx, added))

	all, err := s.Events(ctx, "u1", 0)
	require.NoError(t, err)
	var msgs []string
	for _, e := range all {
		msgs = append(msgs, e.Message)
		assert.Equal(t, "u1", e.PipelineUID)
	}
	assert.Equal(t, []string{"first", "second", "third", "fourth, same time as third"}, msgs)
	assert.Equal(t, Event{PipelineUID: "u1", Type: "Warning", Reason: "StepFailed", Message: "third", Time: at(3), Count: 2}, all[2])

	two, err := s.Events(ctx, "u1", 2)
	require.NoError(t, err)
	assert.Equal(t, all[:2], two)

	none, err := s.Events(ctx, "absent", 10)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestDeleteArchivedBefore(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	old1, old2, kept := rec("ns", 1), rec("ns", 2), rec("ns", 3)
	// old2's pipeline has a newer record too: its events stay.
	old2Deleted := old2
	old2Deleted.State = v1alpha1.ArchiveDeleted
	old2Deleted.Name = historyv1alpha1.RecordName(old2.Pipeline, old2.UID, old2.Generation, v1alpha1.ArchiveDeleted)
	put(t, s, old1, old2, kept, old2Deleted)
	for _, r := range []Record{old1, old2} {
		_, err := s.pool.Exec(ctx, "UPDATE pipeline_records SET archived = now() - interval '40 days' WHERE name = $1", r.Name)
		require.NoError(t, err)
	}
	var events []Event
	for _, r := range []Record{old1, old2, kept} {
		events = append(events, Event{PipelineUID: r.UID, Reason: "Done", Time: at(1)})
	}
	require.NoError(t, s.AddEvents(ctx, events))

	n, err := s.DeleteArchivedBefore(ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	for _, r := range []Record{old1, old2} {
		_, err := s.Get(ctx, "ns", r.Name)
		assert.ErrorIs(t, err, ErrNotFound)
	}
	res, err := s.List(ctx, ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{kept.Name, old2Deleted.Name}, names(res.Records))
	for uid, want := range map[string]int{old1.UID: 0, old2.UID: 1, kept.UID: 1} {
		got, err := s.Events(ctx, uid, 0)
		require.NoError(t, err)
		assert.Len(t, got, want, uid)
	}

	n, err = s.DeleteArchivedBefore(ctx, time.Now().Add(-30*24*time.Hour))
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestRestart: the store rides out a database restart (the pool replaces dead
// connections); a call may fail while the server is down, not after.
func TestRestart(t *testing.T) {
	own := pgtest.Start(t)
	s, err := Open(t.Context(), own.DSN)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Ping(t.Context()))
	put(t, s, rec("ns", 1))

	own.Restart(t)
	var inserted bool
	for try := 0; ; try++ {
		inserted, err = s.Put(t.Context(), rec("ns", 2))
		if err == nil || try == 3 {
			break
		}
	}
	require.NoError(t, err)
	assert.True(t, inserted)
	require.NoError(t, s.Ping(t.Context()))
	assert.Equal(t, 2, count(t, s, "pipeline_records"))

	own.Stop(t)
	assert.ErrorContains(t, s.Ping(t.Context()), "archive: ping")
}
