package historyapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

var (
	t0       = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pipeBody = []byte(`{"apiVersion":"stepwise.dev/v1alpha1","kind":"Pipeline",
		"metadata":{"name":"retire-n1","namespace":"a","uid":"3f2a9c01-0000-4000-8000-000000000001"},
		"spec":{"serviceAccountName":"ops","params":{"node":"n1"}},
		"status":{"phase":"Succeeded","observedGeneration":1,"currentStep":"drain"}}`)
)

// record is an archived record of pipeline name, generation 1, in state, in namespace.
func record(namespace, pipeline string, state archive.State) archive.Record {
	uid := "3f2a9c01-0000-4000-8000-" + pipeline
	return archive.Record{
		UID: uid, Generation: 1, State: state,
		Namespace: namespace, Name: historyv1alpha1.RecordName(pipeline, uid, 1, historyv1alpha1.RecordState(state)),
		Pipeline: pipeline, Phase: string(state), Trigger: "retire", Object: "n1", Creator: "alice",
		Labels:  map[string]string{"app": pipeline},
		Created: t0.Add(-time.Hour), Finished: t0, Archived: t0.Add(time.Second),
		Body: pipeBody,
	}
}

// testLogger logs to t and returns what was logged so far.
func testLogger(t *testing.T) (klog.Logger, func() string) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	return logger, func() string { return logger.GetSink().(ktesting.Underlier).GetBuffer().String() }
}

func ctxIn(namespace string) context.Context {
	return genericapirequest.WithNamespace(context.Background(), namespace)
}

func statusCode(t *testing.T, err error) int32 {
	t.Helper()
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status), "not an API status: %v", err)
	return status.Status().Code
}

func TestListTranslatesSelectors(t *testing.T) {
	after, _ := time.Parse(time.RFC3339, "2026-11-01T00:00:00Z")
	later, _ := time.Parse(time.RFC3339, "2026-11-15T12:30:00+01:00")
	before, _ := time.Parse(time.RFC3339, "2026-12-01T00:00:00Z")

	tests := []struct {
		name      string
		namespace string
		labels    string
		fields    string
		limit     int64
		cont      string

		want       archive.ListOptions // Labels compared as wantLabels
		wantLabels string
		wantNone   bool   // answered empty without asking the archive
		wantCode   int32  // an error status
		wantMsg    string // in the error
	}{
		{name: "nothing", namespace: "a", want: archive.ListOptions{Namespace: "a"}},
		{name: "every namespace", want: archive.ListOptions{}},
		{name: "labels", namespace: "a", labels: "app=x,tier!=db", want: archive.ListOptions{Namespace: "a"}, wantLabels: "app=x,tier!=db"},
		{name: "metadata.name", namespace: "a", fields: "metadata.name=r1",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"metadata.name": "r1"}}},
		{name: "pipeline.name", namespace: "a", fields: "pipeline.name=retire-n1",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"pipeline.name": "retire-n1"}}},
		{name: "state", namespace: "a", fields: "state=Failed",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"state": "Failed"}}},
		{name: "phase with ==", namespace: "a", fields: "phase==Failed",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"phase": "Failed"}}},
		{name: "trigger and object", namespace: "a", fields: "trigger=retire,object=n1",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"trigger": "retire", "object": "n1"}}},
		{name: "the same value twice", namespace: "a", fields: "state=Failed,state=Failed",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"state": "Failed"}}},
		{name: "finished range", namespace: "a", fields: "finishedAfter=2026-11-01T00:00:00Z,finishedBefore=2026-12-01T00:00:00Z",
			want: archive.ListOptions{Namespace: "a", FinishedAfter: after, FinishedBefore: before}},
		{name: "the tighter of two bounds", namespace: "a",
			fields: "finishedAfter=2026-11-15T12:30:00+01:00,finishedAfter=2026-11-01T00:00:00Z,finishedBefore=2026-12-01T00:00:00Z,finishedBefore=2027-01-01T00:00:00Z",
			want:   archive.ListOptions{Namespace: "a", FinishedAfter: later, FinishedBefore: before}},
		{name: "metadata.namespace across namespaces", fields: "metadata.namespace=b",
			want: archive.ListOptions{Namespace: "b"}},
		{name: "metadata.namespace of the request", namespace: "a", fields: "metadata.namespace=a",
			want: archive.ListOptions{Namespace: "a"}},
		{name: "metadata.namespace of another", namespace: "a", fields: "metadata.namespace=b", wantNone: true},
		{name: "a field equal to two values", namespace: "a", fields: "state=Failed,state=Succeeded", wantNone: true},
		{name: "limit and continue", namespace: "a", limit: 2, cont: "7",
			want: archive.ListOptions{Namespace: "a", Limit: 2, Continue: "7"}},

		{name: "pipeline.uid", namespace: "a", fields: "pipeline.uid=3f2a9c01",
			want: archive.ListOptions{Namespace: "a", Fields: map[string]string{"pipeline.uid": "3f2a9c01"}}},
		{name: "an unknown field is named with those supported", namespace: "a", fields: "status.phase=Failed",
			wantCode: http.StatusBadRequest, wantMsg: `"status.phase" is not supported on pipelinerecords; supported: metadata.name, metadata.namespace, pipeline.name, pipeline.uid, state, phase, trigger, object, finishedAfter, finishedBefore`},
		{name: "an unknown field", namespace: "a", fields: "spec.serviceAccountName=ops",
			wantCode: http.StatusBadRequest, wantMsg: `"spec.serviceAccountName" is not supported`},
		{name: "!=", namespace: "a", fields: "state!=Failed",
			wantCode: http.StatusBadRequest, wantMsg: "only = and == are supported"},
		{name: "a time that is not RFC 3339", namespace: "a", fields: "finishedAfter=2026-11-01",
			wantCode: http.StatusBadRequest, wantMsg: "not an RFC 3339 time"},
		{name: "a negative limit", namespace: "a", limit: -1,
			wantCode: http.StatusBadRequest, wantMsg: "limit must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &memArchive{}
			s := newStorage(mem, clocktesting.NewFakePassiveClock(t0))
			opts := &metainternalversion.ListOptions{Limit: tt.limit, Continue: tt.cont}
			if tt.labels != "" {
				sel, err := labels.Parse(tt.labels)
				require.NoError(t, err)
				opts.LabelSelector = sel
			}
			if tt.fields != "" {
				sel, err := fields.ParseSelector(tt.fields)
				require.NoError(t, err)
				opts.FieldSelector = sel
			}

			obj, err := s.List(ctxIn(tt.namespace), opts)
			lists, _ := mem.asked()
			if tt.wantCode != 0 {
				require.Error(t, err)
				assert.Equal(t, tt.wantCode, statusCode(t, err))
				assert.Contains(t, err.Error(), tt.wantMsg)
				assert.Empty(t, lists, "the archive was asked")
				return
			}
			require.NoError(t, err)
			list := obj.(*historyv1alpha1.PipelineRecordList)
			assert.NotNil(t, list.Items, "an empty list must encode as [], not null")
			if tt.wantNone {
				assert.Empty(t, lists, "the archive was asked")
				assert.Empty(t, list.Items)
				return
			}
			require.Len(t, lists, 1)
			got := lists[0]
			require.NotNil(t, got.Labels, "the store takes nil or Everything; Everything is safe")
			assert.Equal(t, tt.wantLabels, got.Labels.String())
			got.Labels = nil
			want := tt.want
			want.Limit, want.MaxBytes = pageBounds(want.Limit) // TestListPagesAreBoundedWhateverTheLimitAsked
			assert.Equal(t, want, got)
		})
	}
}

// The scheme lets through to storage the field selectors storage understands and
// refuses the others, as the list handler runs every selector through it first.
func TestSchemeFieldSelectors(t *testing.T) {
	scheme, err := newScheme()
	require.NoError(t, err)
	kind := historyv1alpha1.SchemeGroupVersion.WithKind("PipelineRecord")
	for _, f := range []string{"metadata.name", "metadata.namespace", "pipeline.name", "state", "phase", "trigger", "object", "finishedAfter", "finishedBefore"} {
		label, value, err := scheme.ConvertFieldLabel(kind, f, "v")
		if assert.NoError(t, err, f) {
			assert.Equal(t, []string{f, "v"}, []string{label, value})
		}
	}
	for _, f := range []string{"spec.suspend", "status.phase"} {
		_, _, err := scheme.ConvertFieldLabel(kind, f, "v")
		assert.ErrorContains(t, err, "supported: metadata.name", f)
	}
}

func TestArchiveErrors(t *testing.T) {
	down := errors.New("connection refused")
	tests := []struct {
		name      string
		archive   *memArchive
		get       string // get this record; list when empty
		cont      string
		wantCode  int32
		wantMsg   string
		wantEvent bool // Events was asked
	}{
		{name: "get: no such record", archive: &memArchive{}, get: "nope",
			wantCode: http.StatusNotFound, wantMsg: `pipelinerecords.history.stepwise.dev "nope" not found`},
		{name: "get: archive down", archive: &memArchive{err: down}, get: "nope",
			wantCode: http.StatusInternalServerError, wantMsg: "read record a/nope: connection refused"},
		{name: "get: events down", archive: &memArchive{records: []archive.Record{record("a", "p", stepwisev1alpha1.ArchiveFailed)}, eventsErr: down},
			get:      historyv1alpha1.RecordName("p", "3f2a9c01-0000-4000-8000-p", 1, historyv1alpha1.RecordFailed),
			wantCode: http.StatusInternalServerError, wantMsg: "read the Events of record a/p.3f2a9c01.1.failed: connection refused", wantEvent: true},
		{name: "list: bad continue", archive: &memArchive{}, cont: "garbage",
			wantCode: http.StatusBadRequest, wantMsg: `invalid continue token "garbage"`},
		{name: "list: field the archive refuses", archive: &memArchive{err: archive.ErrUnsupportedField},
			wantCode: http.StatusBadRequest, wantMsg: "supported field selectors"},
		{name: "list: archive down", archive: &memArchive{err: down},
			wantCode: http.StatusInternalServerError, wantMsg: `list records in namespace "a": connection refused`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStorage(tt.archive, clocktesting.NewFakePassiveClock(t0))
			var err error
			if tt.get != "" {
				_, err = s.Get(ctxIn("a"), tt.get, &metav1.GetOptions{})
			} else {
				_, err = s.List(ctxIn("a"), &metainternalversion.ListOptions{Continue: tt.cont})
			}
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, statusCode(t, err))
			assert.Contains(t, err.Error(), tt.wantMsg)
			_, events := tt.archive.asked()
			assert.Equal(t, tt.wantEvent, len(events) > 0)
		})
	}
}

func TestListPagesAreBoundedWhateverTheLimitAsked(t *testing.T) {
	a := &memArchive{}
	for i := range maxPageRecords + 1 {
		r := record("a", "p", stepwisev1alpha1.ArchiveSucceeded)
		r.UID = fmt.Sprintf("%08d-0000-4000-8000-p", i)
		r.Name = historyv1alpha1.RecordName(r.Pipeline, r.UID, 1, r.State)
		a.records = append(a.records, r)
	}
	s := newStorage(a, clocktesting.NewFakePassiveClock(t0))
	for _, limit := range []int64{0, maxPageRecords + 100} {
		obj, err := s.List(ctxIn("a"), &metainternalversion.ListOptions{Limit: limit})
		require.NoError(t, err)
		list := obj.(*historyv1alpha1.PipelineRecordList)
		assert.Len(t, list.Items, maxPageRecords, "limit %d", limit)
		assert.NotEmpty(t, list.Continue, "the next page is said, limit %d", limit)
	}
	opts, _ := a.asked()
	assert.Equal(t, int64(maxPageBytes), opts[len(opts)-1].MaxBytes)
}

func TestRecordObject(t *testing.T) {
	r := record("a", "retire-n1", stepwisev1alpha1.ArchiveSucceeded)
	logger, logged := testLogger(t)
	obj := recordObject(logger, r)

	assert.Equal(t, "retire-n1.3f2a9c01.1.succeeded", obj.Name)
	assert.Equal(t, "a", obj.Namespace)
	assert.Equal(t, map[string]string{"app": "retire-n1"}, obj.Labels)
	assert.Equal(t, metav1.NewTime(r.Archived), obj.CreationTimestamp, "creationTimestamp is when it was archived")
	assert.Empty(t, obj.ResourceVersion)
	assert.Equal(t, historyv1alpha1.PipelineReference{Name: "retire-n1", UID: r.UID, Generation: 1, Created: metav1.NewTime(r.Created)}, obj.Pipeline)
	assert.Equal(t, historyv1alpha1.RecordSucceeded, obj.State)
	assert.Equal(t, stepwisev1alpha1.PipelineSucceeded, obj.Phase)
	assert.Equal(t, []string{"retire", "n1", "alice"}, []string{obj.Trigger, obj.Object, obj.Creator})
	assert.Equal(t, metav1.NewTime(t0), obj.Finished)
	assert.Equal(t, "ops", obj.Spec.ServiceAccountName, "spec comes from the body")
	assert.Equal(t, map[string]string{"node": "n1"}, obj.Spec.Params)
	assert.Equal(t, stepwisev1alpha1.PipelineSucceeded, obj.Status.Phase, "status comes from the body")
	assert.Equal(t, "drain", obj.Status.CurrentStep)
	assert.Nil(t, obj.Events)
	assert.Empty(t, logged())

	t.Run("the UID is the record's, stable", func(t *testing.T) {
		assert.Equal(t, obj.UID, recordObject(klog.Background(), r).UID)
		assert.Len(t, string(obj.UID), 36)
		other := r
		other.Generation = 2
		assert.NotEqual(t, obj.UID, recordObject(klog.Background(), other).UID)
		other = r
		other.State = stepwisev1alpha1.ArchiveDeleted
		assert.NotEqual(t, obj.UID, recordObject(klog.Background(), other).UID)
	})
	t.Run("a body that does not decode leaves spec and status empty", func(t *testing.T) {
		for _, body := range [][]byte{[]byte(`{"spec":`), []byte(`{"spec":{"suspend":true,"steps":"not a list"}}`)} {
			bad := r
			bad.Body = body
			logger, logged := testLogger(t)
			got := recordObject(logger, bad)
			assert.Equal(t, stepwisev1alpha1.PipelineSpec{}, got.Spec, "nothing half-decoded")
			assert.Equal(t, stepwisev1alpha1.PipelineStatus{}, got.Status)
			assert.Equal(t, obj.Name, got.Name, "the rest of the record is served")
			assert.Contains(t, logged(), "Archived pipeline does not decode")
			assert.Contains(t, logged(), `record="a/retire-n1.3f2a9c01.1.succeeded"`)
		}
	})
	t.Run("no body, no spec and status, nothing logged", func(t *testing.T) {
		empty := r
		empty.Body = nil
		logger, logged := testLogger(t)
		got := recordObject(logger, empty)
		assert.Equal(t, stepwisev1alpha1.PipelineSpec{}, got.Spec)
		assert.Empty(t, logged())
	})
}

func TestEventsOnGetOnly(t *testing.T) {
	good := record("a", "retire-n1", stepwisev1alpha1.ArchiveSucceeded)
	bad := record("a", "broken", stepwisev1alpha1.ArchiveFailed)
	bad.Body = []byte("{")
	mem := &memArchive{
		records: []archive.Record{good, bad},
		events: map[string][]archive.Event{good.UID: {
			{PipelineUID: good.UID, Type: "Normal", Reason: "Started", Message: "step drain", Time: t0.Add(-time.Minute), Count: 1},
			{PipelineUID: good.UID, Type: "Warning", Reason: "Retry", Message: "eviction blocked", Time: t0, Count: 3},
		}},
	}
	s := newStorage(mem, clocktesting.NewFakePassiveClock(t0))

	obj, err := s.List(ctxIn("a"), &metainternalversion.ListOptions{})
	require.NoError(t, err, "a record whose body does not decode does not fail the list")
	list := obj.(*historyv1alpha1.PipelineRecordList)
	require.Len(t, list.Items, 2)
	for _, item := range list.Items {
		assert.Nil(t, item.Events, item.Name)
	}
	assert.Equal(t, "ops", list.Items[0].Spec.ServiceAccountName)
	_, eventCalls := mem.asked()
	assert.Empty(t, eventCalls, "a list does not read Events")

	obj, err = s.Get(ctxIn("a"), good.Name, &metav1.GetOptions{})
	require.NoError(t, err)
	got := obj.(*historyv1alpha1.PipelineRecord)
	assert.Equal(t, []historyv1alpha1.RecordedEvent{
		{Type: "Normal", Reason: "Started", Message: "step drain", Time: metav1.NewTime(t0.Add(-time.Minute)), Count: 1},
		{Type: "Warning", Reason: "Retry", Message: "eviction blocked", Time: metav1.NewTime(t0), Count: 3},
	}, got.Events)
	assert.Equal(t, "ops", got.Spec.ServiceAccountName)
	_, eventCalls = mem.asked()
	assert.Equal(t, []int{maxEvents}, eventCalls, "Events are bounded")

	_, err = s.Get(ctxIn("b"), good.Name, &metav1.GetOptions{})
	assert.Equal(t, int32(http.StatusNotFound), statusCode(t, err), "a record is found in its own namespace only")
}

func TestTable(t *testing.T) {
	now := t0.Add(3*time.Hour + 5*time.Minute)
	s := newStorage(&memArchive{}, clocktesting.NewFakePassiveClock(now))
	ok := recordObject(klog.Background(), record("a", "retire-n1", stepwisev1alpha1.ArchiveSucceeded))
	failed := recordObject(klog.Background(), record("a", "retire-n2", stepwisev1alpha1.ArchiveFailed))
	failed.Finished = metav1.NewTime(now.Add(-90 * time.Second))
	failed.Trigger, failed.Object = "", ""
	unfinished := recordObject(klog.Background(), record("a", "retire-n3", stepwisev1alpha1.ArchiveRemoved))
	unfinished.Finished = metav1.Time{}

	wantColumns := []string{"Name", "Pipeline", "State", "Phase", "Trigger", "Object", "Finished"}
	tests := []struct {
		name     string
		obj      runtime.Object
		opts     *metav1.TableOptions
		wantCols []string
		wantRows [][]any
		wantCont string
	}{
		{
			name: "a list",
			obj: &historyv1alpha1.PipelineRecordList{
				ListMeta: metav1.ListMeta{Continue: "next"},
				Items:    []historyv1alpha1.PipelineRecord{*ok, *failed, *unfinished},
			},
			wantCols: wantColumns,
			wantRows: [][]any{
				{"retire-n1.3f2a9c01.1.succeeded", "retire-n1", "Succeeded", "Succeeded", "retire", "n1", "3h5m"},
				{"retire-n2.3f2a9c01.1.failed", "retire-n2", "Failed", "Failed", "", "", "90s"},
				{"retire-n3.3f2a9c01.1.removed", "retire-n3", "Removed", "Removed", "retire", "n1", "<unknown>"},
			},
			wantCont: "next",
		},
		{
			name:     "one record",
			obj:      ok,
			wantCols: wantColumns,
			wantRows: [][]any{{"retire-n1.3f2a9c01.1.succeeded", "retire-n1", "Succeeded", "Succeeded", "retire", "n1", "3h5m"}},
		},
		{
			name:     "no headers",
			obj:      ok,
			opts:     &metav1.TableOptions{NoHeaders: true},
			wantRows: [][]any{{"retire-n1.3f2a9c01.1.succeeded", "retire-n1", "Succeeded", "Succeeded", "retire", "n1", "3h5m"}},
		},
		{
			name:     "an empty list",
			obj:      &historyv1alpha1.PipelineRecordList{},
			wantCols: wantColumns,
			wantRows: [][]any{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts == nil {
				opts = &metav1.TableOptions{}
			}
			table, err := s.ConvertToTable(context.Background(), tt.obj, opts)
			require.NoError(t, err)
			var cols []string
			for _, c := range table.ColumnDefinitions {
				cols = append(cols, c.Name)
			}
			assert.Equal(t, tt.wantCols, cols)
			rows := [][]any{}
			for _, row := range table.Rows {
				rows = append(rows, row.Cells)
				require.IsType(t, &historyv1alpha1.PipelineRecord{}, row.Object.Object, "each row carries its object, for includeObject")
				assert.Equal(t, row.Cells[0], row.Object.Object.(*historyv1alpha1.PipelineRecord).Name)
			}
			assert.Equal(t, tt.wantRows, rows)
			assert.Equal(t, tt.wantCont, table.Continue)
		})
	}

	_, err := s.ConvertToTable(context.Background(), &metav1.Status{}, nil)
	assert.ErrorContains(t, err, "not a record")
}
