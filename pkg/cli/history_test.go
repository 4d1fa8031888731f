package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// historyClock is the time the history tests run at: t0 plus a day.
var historyClock = t0.Add(24 * time.Hour)

// record is a record of a three-step pipeline, of the state and phase given, finished
// ago before historyClock.
func record(ns, pipeline, uid string, state historyv1alpha1.RecordState, ago time.Duration, mutate ...func(*historyv1alpha1.PipelineRecord)) *historyv1alpha1.PipelineRecord {
	r := &historyv1alpha1.PipelineRecord{
		ObjectMeta: metav1.ObjectMeta{Name: historyv1alpha1.RecordName(pipeline, uid, 1, state), Namespace: ns,
			Labels: map[string]string{"team": "blue"}},
		Pipeline: historyv1alpha1.PipelineReference{Name: pipeline, UID: uid, Generation: 1},
		State:    state,
		Phase:    v1alpha1.PipelinePhase(state),
		Finished: metav1.NewTime(historyClock.Add(-ago)),
		Spec: v1alpha1.PipelineSpec{Steps: []v1alpha1.Step{
			{Name: "cordon", Executor: "k8s.cordon"}, {Name: "drain", Executor: "k8s.drain"}, {Name: "retire", Executor: "test.noop"},
		}},
		Status: v1alpha1.PipelineStatus{Phase: v1alpha1.PipelinePhase(state), Progress: "3/3", Steps: []v1alpha1.StepStatus{
			{Name: "cordon", Executor: "k8s.cordon", Phase: v1alpha1.StepSucceeded, Attempts: 1, StartTime: at(0), CompletionTime: at(time.Second), Message: "cordoned"},
			{Name: "drain", Executor: "k8s.drain", Phase: v1alpha1.StepSucceeded, Attempts: 1, StartTime: at(time.Second), CompletionTime: at(time.Minute), Message: "drained"},
			{Name: "retire", Executor: "test.noop", Phase: v1alpha1.StepSucceeded, Attempts: 1, StartTime: at(time.Minute), CompletionTime: at(time.Minute), Message: ""},
		}},
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

// failedAtDrain makes a record's pipeline fail at drain, so that retire never ran.
func failedAtDrain(r *historyv1alpha1.PipelineRecord) {
	r.Phase = v1alpha1.PipelineFailed
	r.Status.Phase, r.Status.CurrentStep, r.Status.Progress = v1alpha1.PipelineFailed, "drain", "1/3"
	r.Status.Steps[1].Phase, r.Status.Steps[1].Reason, r.Status.Steps[1].Message = v1alpha1.StepFailed, "EvictionRefused", "pdb web allows no disruption"
	r.Status.Steps[1].CompletionTime = nil
	r.Status.Steps[1].Conditions = ready(metav1.ConditionFalse, "EvictionRefused", "pdb", 2*time.Minute)
	r.Status.Steps = r.Status.Steps[:2]
}

func triggered(trigger, object string) func(*historyv1alpha1.PipelineRecord) {
	return func(r *historyv1alpha1.PipelineRecord) { r.Trigger, r.Object = trigger, object }
}

// archive stands for the history API in front of the fake clientset: it answers lists as
// the operator does (field and label selectors, pages in the order the records were
// written, no Events) and remembers what it was asked.
type archive struct {
	records []*historyv1alpha1.PipelineRecord
	// pageMax bounds a page whatever the limit asked, as the operator's maxPageRecords.
	pageMax int
	asked   []metav1.ListOptions
}

// historyClients are fake clients whose history API is an archive of records, in the
// order they were written.
func historyClients(records ...*historyv1alpha1.PipelineRecord) (*Clients, *fake.Clientset, *archive) {
	objs := make([]runtime.Object, 0, len(records))
	for _, r := range records {
		objs = append(objs, r) // for gets
	}
	c, sw := fakeClients(objs...)
	c.Now = func() time.Time { return historyClock }
	a := &archive{records: records, pageMax: 500}
	sw.PrependReactor("list", "pipelinerecords", a.list)
	return c, sw, a
}

func (a *archive) list(action clienttesting.Action) (bool, runtime.Object, error) {
	opts := action.(clienttesting.ListActionImpl).ListOptions
	a.asked = append(a.asked, opts)
	fieldSel, err := fields.ParseSelector(opts.FieldSelector)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	labelSel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	var matched []historyv1alpha1.PipelineRecord
	for _, r := range a.records {
		if ns := action.GetNamespace(); ns != "" && r.Namespace != ns {
			continue
		}
		ok, err := matchFields(r, fieldSel)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if ok && labelSel.Matches(labels.Set(r.Labels)) {
			item := r.DeepCopy()
			item.Events = nil // a list leaves them out
			matched = append(matched, *item)
		}
	}
	start := 0
	if opts.Continue != "" {
		if start, err = strconv.Atoi(opts.Continue); err != nil {
			return true, nil, apierrors.NewBadRequest("invalid continue token")
		}
	}
	size := a.pageMax
	if opts.Limit > 0 && int(opts.Limit) < size {
		size = int(opts.Limit)
	}
	end := min(start+size, len(matched))
	list := &historyv1alpha1.PipelineRecordList{Items: matched[start:end]}
	if end < len(matched) {
		list.Continue = strconv.Itoa(end)
	}
	return true, list, nil
}

// matchFields tells whether r has the fields the selector asks, as the archive reads them.
func matchFields(r *historyv1alpha1.PipelineRecord, sel fields.Selector) (bool, error) {
	for _, req := range sel.Requirements() {
		var ok bool
		switch req.Field {
		case historyv1alpha1.FieldPipelineName:
			ok = r.Pipeline.Name == req.Value
		case historyv1alpha1.FieldState:
			ok = string(r.State) == req.Value
		case historyv1alpha1.FieldTrigger:
			ok = r.Trigger == req.Value
		case historyv1alpha1.FieldObject:
			ok = r.Object == req.Value
		case historyv1alpha1.FieldFinishedAfter:
			after, err := time.Parse(time.RFC3339, req.Value)
			if err != nil {
				return false, err
			}
			ok = !r.Finished.Time.Before(after)
		default:
			return false, fmt.Errorf("field selector %q is not supported", req.Field)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// tableLines are out's lines, each with its runs of spaces made one, for tables.
func tableLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		ls = append(ls, strings.Join(strings.Fields(l), " "))
	}
	return ls
}

func TestHistoryTable(t *testing.T) {
	records := []*historyv1alpha1.PipelineRecord{
		record("demo", "retire-n1", "3f2a9c01-aaaa", historyv1alpha1.RecordSucceeded, 2*time.Hour, triggered("retire", "n1")),
		record("other", "elsewhere", "77777777-bbbb", historyv1alpha1.RecordSucceeded, 90*time.Minute),
		record("demo", "retire-n2", "0b0b0b0b-cccc", historyv1alpha1.RecordFailed, 3*24*time.Hour, triggered("retire", "n2"), failedAtDrain),
		record("demo", "retire-n1", "3f2a9c01-aaaa", historyv1alpha1.RecordDeleted, 30*time.Second, triggered("retire", "n1"), func(r *historyv1alpha1.PipelineRecord) {
			r.Phase, r.Status.Phase = v1alpha1.PipelineDeleting, v1alpha1.PipelineDeleting
			for i := range r.Status.Steps {
				r.Status.Steps[i].Phase = v1alpha1.StepDeleted
			}
		}),
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "the namespace's, in the order they were written",
			args: []string{"history"},
			want: []string{
				"PIPELINE STATE PHASE TRIGGER OBJECT FINISHED STEPS RECORD",
				"retire-n1 Succeeded Succeeded retire n1 120m 3/3 succeeded retire-n1.3f2a9c01.1.succeeded",
				"retire-n2 Failed Failed retire n2 3d 1/3, failed at drain retire-n2.0b0b0b0b.1.failed",
				"retire-n1 Deleted Deleting retire n1 30s 0/3, 3 torn down retire-n1.3f2a9c01.1.deleted",
			},
		},
		{
			name: "-A: every namespace's, with the namespace",
			args: []string{"history", "-A"},
			want: []string{
				"NAMESPACE PIPELINE STATE PHASE TRIGGER OBJECT FINISHED STEPS RECORD",
				"demo retire-n1 Succeeded Succeeded retire n1 120m 3/3 succeeded retire-n1.3f2a9c01.1.succeeded",
				"other elsewhere Succeeded Succeeded - - 90m 3/3 succeeded elsewhere.77777777.1.succeeded",
				"demo retire-n2 Failed Failed retire n2 3d 1/3, failed at drain retire-n2.0b0b0b0b.1.failed",
				"demo retire-n1 Deleted Deleting retire n1 30s 0/3, 3 torn down retire-n1.3f2a9c01.1.deleted",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, a := historyClients(records...)
			code, out, errOut := run(t, c, tt.args...)
			require.Equal(t, ExitOK, code, errOut)
			assert.Equal(t, tt.want, tableLines(out))
			assert.Empty(t, errOut)
			require.Len(t, a.asked, 1)
			assert.Equal(t, metav1.ListOptions{Limit: defaultHistoryLimit}, a.asked[0], "no selector")
		})
	}
}

func TestHistoryNoRecords(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{args: []string{"history"}, want: "No pipeline records in namespace demo.\n"},
		{args: []string{"history", "-A"}, want: "No pipeline records in any namespace.\n"},
		{args: []string{"history", "gone"}, want: "No records of pipeline gone in namespace demo.\n"},
	} {
		c, _, _ := historyClients(record("demo", "hello", "u1", historyv1alpha1.RecordSucceeded, time.Hour, triggered("t", "o")))
		code, out, errOut := run(t, c, append(tt.args, "--trigger", "nope")...)
		require.Equal(t, ExitOK, code, errOut)
		assert.Empty(t, out)
		assert.Equal(t, tt.want, errOut)
	}
}

func TestHistoryPipeline(t *testing.T) {
	hello := func(state historyv1alpha1.RecordState, uid string, ago time.Duration, mutate ...func(*historyv1alpha1.PipelineRecord)) *historyv1alpha1.PipelineRecord {
		return record("demo", "hello", uid, state, ago, mutate...)
	}
	withEvents := func(r *historyv1alpha1.PipelineRecord) {
		r.Creator = "alice"
		r.Events = []historyv1alpha1.RecordedEvent{
			{Type: "Normal", Reason: "StepSucceeded", Message: "step cordon succeeded", Time: metav1.NewTime(t0.Add(time.Second))},
			{Type: "Warning", Reason: "EvictionRefused", Message: "pdb web allows no disruption", Time: metav1.NewTime(t0.Add(time.Minute)), Count: 3},
		}
	}

	t.Run("one pipeline: the table, then its last record's steps and Events", func(t *testing.T) {
		c, _, a := historyClients(
			hello(historyv1alpha1.RecordFailed, "a1b2c3d4-0000", 2*time.Hour, failedAtDrain, triggered("retire", "n1"), withEvents),
			record("demo", "other", "ffffffff-0000", historyv1alpha1.RecordSucceeded, time.Hour),
		)
		code, out, errOut := run(t, c, "history", "hello")
		require.Equal(t, ExitOK, code, errOut)
		assert.Equal(t, []string{
			"PIPELINE STATE PHASE TRIGGER OBJECT FINISHED STEPS RECORD",
			"hello Failed Failed retire n1 120m 1/3, failed at drain hello.a1b2c3d4.1.failed",
			"",
			"Record: hello.a1b2c3d4.1.failed",
			"Pipeline: demo/hello (UID a1b2c3d4-0000, generation 1)",
			"State: Failed (phase Failed) at 2030-01-03T08:00:00Z",
			"Trigger: retire (object n1)",
			"Creator: alice",
			"",
			"STEP EXECUTOR PHASE HOOK ATTEMPTS DURATION MESSAGE",
			"cordon k8s.cordon Succeeded - 1 1s cordoned",
			// The failed step's duration runs until its Ready condition's transition.
			"drain k8s.drain Failed - 1 119s EvictionRefused: pdb web allows no disruption",
			"retire test.noop Pending - 0 -",
			"",
			"Events:",
			"TIME TYPE REASON MESSAGE",
			"2030-01-02T10:00:01Z Normal StepSucceeded step cordon succeeded",
			"2030-01-02T10:01:00Z Warning EvictionRefused pdb web allows no disruption (x3)",
		}, tableLines(out))
		require.Len(t, a.asked, 1)
		assert.Equal(t, "pipeline.name=hello", a.asked[0].FieldSelector)
	})

	t.Run("the last record of its pipeline, with no Events", func(t *testing.T) {
		c, _, _ := historyClients(
			hello(historyv1alpha1.RecordSucceeded, "a1b2c3d4-0000", 2*time.Hour, withEvents),
			hello(historyv1alpha1.RecordDeleted, "a1b2c3d4-0000", time.Hour),
		)
		code, out, errOut := run(t, c, "history", "hello")
		require.Equal(t, ExitOK, code, errOut)
		assert.Contains(t, tableLines(out), "Record: hello.a1b2c3d4.1.deleted")
		assert.Contains(t, tableLines(out), "Events: none recorded")
	})

	t.Run("a template's pipeline: the steps of its template", func(t *testing.T) {
		c, _, _ := historyClients(hello(historyv1alpha1.RecordSucceeded, "a1b2c3d4-0000", time.Hour, func(r *historyv1alpha1.PipelineRecord) {
			r.Status.Template = &v1alpha1.TemplateSnapshot{Name: "retire-node", Steps: r.Spec.Steps}
			r.Spec.Steps = nil
			r.Spec.TemplateRef = &v1alpha1.TemplateRef{Name: "retire-node"}
		}))
		code, out, errOut := run(t, c, "history", "hello")
		require.Equal(t, ExitOK, code, errOut)
		assert.Contains(t, tableLines(out), "hello Succeeded Succeeded - - 60m 3/3 succeeded hello.a1b2c3d4.1.succeeded")
		assert.Contains(t, tableLines(out), "drain k8s.drain Succeeded - 1 59s drained")
	})

	t.Run("pipelines of one name that lived one after the other: no steps", func(t *testing.T) {
		c, sw, _ := historyClients(
			hello(historyv1alpha1.RecordSucceeded, "a1b2c3d4-0000", 2*time.Hour),
			hello(historyv1alpha1.RecordSucceeded, "e5f6a7b8-0000", time.Hour),
		)
		code, out, errOut := run(t, c, "history", "hello")
		require.Equal(t, ExitOK, code, errOut)
		assert.Equal(t, []string{
			"PIPELINE STATE PHASE TRIGGER OBJECT FINISHED STEPS RECORD",
			"hello Succeeded Succeeded - - 120m 3/3 succeeded hello.a1b2c3d4.1.succeeded",
			"hello Succeeded Succeeded - - 60m 3/3 succeeded hello.e5f6a7b8.1.succeeded",
			"",
			"The records are of 2 pipelines named hello (UIDs a1b2c3d4-0000, e5f6a7b8-0000): kubectl get pipelinerecord RECORD -o yaml shows one.",
		}, tableLines(out))
		for _, a := range sw.Actions() {
			assert.NotEqual(t, "get", a.GetVerb(), "no record to get")
		}
	})

	t.Run("-o yaml: the records as listed", func(t *testing.T) {
		c, sw, _ := historyClients(hello(historyv1alpha1.RecordSucceeded, "a1b2c3d4-0000", time.Hour, withEvents))
		code, out, errOut := run(t, c, "history", "hello", "-o", "yaml")
		require.Equal(t, ExitOK, code, errOut)
		var got historyv1alpha1.PipelineRecordList
		require.NoError(t, yaml.Unmarshal([]byte(out), &got), out)
		assert.Equal(t, "history.stepwise.dev/v1alpha1", got.APIVersion)
		assert.Equal(t, "PipelineRecordList", got.Kind)
		require.Len(t, got.Items, 1)
		assert.Equal(t, "PipelineRecord", got.Items[0].Kind)
		assert.Equal(t, "hello.a1b2c3d4.1.succeeded", got.Items[0].Name)
		assert.Len(t, got.Items[0].Status.Steps, 3)
		for _, a := range sw.Actions() {
			assert.NotEqual(t, "get", a.GetVerb(), "-o prints the list")
		}
	})
}

func TestHistorySelectors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantFields string
		wantLabels string
	}{
		{name: "none", args: nil},
		{name: "PIPELINE", args: []string{"hello"}, wantFields: "pipeline.name=hello"},
		{name: "--state", args: []string{"--state", "Failed"}, wantFields: "state=Failed"},
		{name: "--state in any case", args: []string{"--state", "orphaned"}, wantFields: "state=Orphaned"},
		{name: "--trigger", args: []string{"--trigger", "retire"}, wantFields: "trigger=retire"},
		{name: "--object", args: []string{"--object", "ns/n1"}, wantFields: "object=ns/n1"},
		{name: "--object, escaped", args: []string{"--object", "a,b=c"}, wantFields: `object=a\,b\=c`},
		{name: "--since: finished after now less the duration", args: []string{"--since", "36h"}, wantFields: "finishedAfter=2030-01-01T22:00:00Z"},
		{name: "-l", args: []string{"-l", "team=blue,tier!=db"}, wantLabels: "team=blue,tier!=db"},
		{
			name:       "all of them",
			args:       []string{"hello", "--state", "Succeeded", "--trigger", "retire", "--object", "n1", "--since", "1h", "-l", "team=blue", "-A"},
			wantFields: "pipeline.name=hello,state=Succeeded,trigger=retire,object=n1,finishedAfter=2030-01-03T09:00:00Z",
			wantLabels: "team=blue",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, a := historyClients()
			code, _, errOut := run(t, c, append([]string{"history"}, tt.args...)...)
			require.Equal(t, ExitOK, code, errOut)
			require.Len(t, a.asked, 1)
			assert.Equal(t, tt.wantFields, a.asked[0].FieldSelector)
			assert.Equal(t, tt.wantLabels, a.asked[0].LabelSelector)
		})
	}
}

// TestHistoryFilters: what the selectors select, from records in the archive.
func TestHistoryFilters(t *testing.T) {
	records := []*historyv1alpha1.PipelineRecord{
		record("demo", "a", "a0000000", historyv1alpha1.RecordSucceeded, 48*time.Hour, triggered("retire", "n1")),
		record("demo", "b", "b0000000", historyv1alpha1.RecordFailed, 2*time.Hour, triggered("retire", "n2"), failedAtDrain),
		record("demo", "c", "c0000000", historyv1alpha1.RecordSucceeded, time.Hour, triggered("rotate", "n1"), func(r *historyv1alpha1.PipelineRecord) {
			r.Labels = map[string]string{"team": "red"}
		}),
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{args: []string{"--state", "failed"}, want: []string{"b"}},
		{args: []string{"--trigger", "retire"}, want: []string{"a", "b"}},
		{args: []string{"--object", "n1"}, want: []string{"a", "c"}},
		{args: []string{"--since", "3h"}, want: []string{"b", "c"}},
		{args: []string{"-l", "team=red"}, want: []string{"c"}},
		{args: []string{"--trigger", "retire", "--since", "3h"}, want: []string{"b"}},
	} {
		c, _, _ := historyClients(records...)
		code, out, errOut := run(t, c, append([]string{"history"}, tt.args...)...)
		require.Equal(t, ExitOK, code, errOut)
		var got []string
		for _, l := range tableLines(out)[1:] {
			got = append(got, strings.Fields(l)[0])
		}
		assert.Equal(t, tt.want, got, "%v", tt.args)
	}
}

func TestHistoryLimit(t *testing.T) {
	var records []*historyv1alpha1.PipelineRecord
	for i := range 5 {
		records = append(records, record("demo", fmt.Sprintf("p%d", i), fmt.Sprintf("%08d", i), historyv1alpha1.RecordSucceeded, time.Hour))
	}
	const more = "more records than --limit 3: raise --limit (0 lists them all), or narrow with --since, --state or -l\n"
	tests := []struct {
		name      string
		args      []string
		pageMax   int
		want      []string
		wantAsked []metav1.ListOptions
		wantErr   string
	}{
		{
			name: "one page, and more", args: []string{"--limit", "3"}, pageMax: 500,
			want:      []string{"p0", "p1", "p2"},
			wantAsked: []metav1.ListOptions{{Limit: 3}},
			wantErr:   more,
		},
		{
			name: "the server's pages are smaller: continue until the limit", args: []string{"--limit", "3"}, pageMax: 2,
			want:      []string{"p0", "p1", "p2"},
			wantAsked: []metav1.ListOptions{{Limit: 3}, {Limit: 1, Continue: "2"}},
			wantErr:   more,
		},
		{
			name: "exactly the limit: no more", args: []string{"--limit", "5"}, pageMax: 2,
			want:      []string{"p0", "p1", "p2", "p3", "p4"},
			wantAsked: []metav1.ListOptions{{Limit: 5}, {Limit: 3, Continue: "2"}, {Limit: 1, Continue: "4"}},
		},
		{
			name: "0: every page", args: []string{"--limit", "0"}, pageMax: 2,
			want:      []string{"p0", "p1", "p2", "p3", "p4"},
			wantAsked: []metav1.ListOptions{{}, {Continue: "2"}, {Continue: "4"}},
		},
		{
			name: "the default, with the selectors on every page", args: []string{"-l", "team=blue"}, pageMax: 2,
			want: []string{"p0", "p1", "p2", "p3", "p4"},
			wantAsked: []metav1.ListOptions{
				{LabelSelector: "team=blue", Limit: 100},
				{LabelSelector: "team=blue", Limit: 98, Continue: "2"},
				{LabelSelector: "team=blue", Limit: 96, Continue: "4"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, a := historyClients(records...)
			a.pageMax = tt.pageMax
			code, out, errOut := run(t, c, append([]string{"history"}, tt.args...)...)
			require.Equal(t, ExitOK, code, errOut)
			var got []string
			for _, l := range tableLines(out)[1:] {
				got = append(got, strings.Fields(l)[0])
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantAsked, a.asked)
			assert.Equal(t, tt.wantErr, errOut)
		})
	}

	t.Run("a server that pages not: no more than the limit", func(t *testing.T) {
		c, sw, _ := historyClients()
		sw.PrependReactor("list", "pipelinerecords", func(clienttesting.Action) (bool, runtime.Object, error) {
			list := &historyv1alpha1.PipelineRecordList{}
			for _, r := range records {
				list.Items = append(list.Items, *r)
			}
			return true, list, nil
		})
		code, out, errOut := run(t, c, "history", "--limit", "3", "-o", "json")
		require.Equal(t, ExitOK, code, errOut)
		var got historyv1alpha1.PipelineRecordList
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		assert.Len(t, got.Items, 3)
		assert.Equal(t, more, errOut)
	})
}

func TestHistoryErrors(t *testing.T) {
	resource := schema.GroupResource{Group: "history.stepwise.dev", Resource: "pipelinerecords"}
	// What client-go makes of the aggregator's 404 for a group no APIService registers.
	notServed := apierrors.NewGenericServerResponse(http.StatusNotFound, "GET", resource, "", "404 page not found", 0, true)
	forbidden := func(ns string) error {
		return apierrors.NewForbidden(resource, "", fmt.Errorf("User %q cannot list resource %q in API group %q in the namespace %q", "bob", "pipelinerecords", "history.stepwise.dev", ns))
	}
	tests := []struct {
		name     string
		args     []string
		verb     string
		err      error
		wantErr  []string
		wantNone bool
	}{
		{
			name: "the API not served", args: []string{"history"}, verb: "list", err: notServed,
			wantErr: []string{
				"error: the history API is not installed: the operator serves it with --archive-dsn-file and --history-secure-port (docs/history.md)",
				"the server could not find the requested resource",
			},
		},
		{
			name: "403", args: []string{"history"}, verb: "list", err: forbidden("demo"),
			wantErr: []string{
				"error: you may not list pipelinerecords in namespace demo: ask for get/list on pipelinerecords.history.stepwise.dev",
				`User "bob" cannot list`,
			},
		},
		{
			name: "403 in all namespaces", args: []string{"history", "-A"}, verb: "list", err: forbidden(""),
			wantErr: []string{
				"error: you may not list pipelinerecords in all namespaces: ask for get/list on pipelinerecords.history.stepwise.dev in every namespace (a ClusterRole), or leave out -A",
			},
		},
		{
			name: "403 on the get of the last record", args: []string{"history", "hello"}, verb: "get", err: forbidden("demo"),
			wantErr: []string{"error: you may not get pipelinerecords in namespace demo: ask for get/list on pipelinerecords.history.stepwise.dev"},
		},
		{
			name: "the last record gone since the list", args: []string{"history", "hello"}, verb: "get", err: apierrors.NewNotFound(resource, "hello.a1b2c3d4.1.succeeded"),
			wantErr: []string{"error: record hello.a1b2c3d4.1.succeeded is no longer in the archive: list again"},
		},
		{
			name: "the operator does not answer", args: []string{"history"}, verb: "list", err: apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
			wantErr: []string{"error: the history API does not answer: is the operator running, and its APIService Available (kubectl get apiservice v1alpha1.history.stepwise.dev)?"},
		},
		{
			name: "another error, as the server said", args: []string{"history"}, verb: "list", err: apierrors.NewBadRequest("invalid continue token"),
			wantErr: []string{"error: list pipelinerecords in namespace demo: invalid continue token"},
		},
		{name: "an unknown state", args: []string{"history", "--state", "Gone"}, wantNone: true,
			wantErr: []string{`error: --state "Gone" is no state a record keeps: use one of Succeeded, Failed, Deleted, Orphaned, Removed`}},
		{name: "a negative limit", args: []string{"history", "--limit", "-1"}, wantNone: true, wantErr: []string{"error: --limit must not be negative, got -1"}},
		{name: "a negative --since", args: []string{"history", "--since", "-1h"}, wantNone: true, wantErr: []string{"error: --since must be positive, got -1h0m0s"}},
		{name: "an unknown output", args: []string{"history", "-o", "wide"}, wantNone: true, wantErr: []string{`error: --output "wide" is not supported: use json or yaml`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sw, a := historyClients(record("demo", "hello", "a1b2c3d4-0000", historyv1alpha1.RecordSucceeded, time.Hour))
			if tt.err != nil {
				sw.PrependReactor(tt.verb, "pipelinerecords", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.err
				})
			}
			code, _, errOut := run(t, c, tt.args...)
			assert.Equal(t, ExitError, code)
			for _, want := range tt.wantErr {
				assert.Contains(t, errOut, want)
			}
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line:\n%s", errOut)
			if tt.wantNone {
				assert.Empty(t, a.asked, "refused before any request")
			}
		})
	}
}

// TestHistoryHostileText: what anyone who may write a pipeline, its status, or an Event
// wrote is shown, not obeyed by the terminal.
func TestHistoryHostileText(t *testing.T) {
	hostile := record("demo", "hello", "a1b2c3d4-0000", historyv1alpha1.RecordFailed, time.Hour, failedAtDrain, func(r *historyv1alpha1.PipelineRecord) {
		r.Trigger, r.Object = "t\x1b]0;pwned\x07", "n1\nFAKE ROW"
		r.Creator = "eve\x1b[2J"
		r.Status.Steps[1].Message = "evicted\n\x1b[31mred\x1b[0m\rover\u009b1m"
		r.Events = []historyv1alpha1.RecordedEvent{{Type: "Warning", Reason: "Bad\tReason", Message: "line one\nline two\x1b[A", Time: metav1.NewTime(t0)}}
	})
	c, _, _ := historyClients(hostile)
	code, out, errOut := run(t, c, "history", "hello")
	require.Equal(t, ExitOK, code, errOut)
	assert.NotContains(t, out, "\x1b")
	assert.NotContains(t, out, "\x07")
	assert.NotContains(t, out, "\r")
	assert.NotContains(t, out, "\u009b")
	ls := tableLines(out)
	assert.Equal(t, `hello Failed Failed t\x1b]0;pwned\x07 n1 FAKE ROW 60m 1/3, failed at drain hello.a1b2c3d4.1.failed`, ls[1])
	assert.Contains(t, ls, `Trigger: t\x1b]0;pwned\x07 (object n1 FAKE ROW)`)
	assert.Contains(t, ls, `Creator: eve\x1b[2J`)
	assert.Contains(t, ls, `drain k8s.drain Failed - 1 119s EvictionRefused: evicted \x1b[31mred\x1b[0m over\u009b1m`)
	assert.Contains(t, ls, `2030-01-02T10:00:00Z Warning Bad Reason line one line two\x1b[A`)

	// -o yaml and -o json: escaped too, and the same text once decoded.
	for _, output := range []string{"yaml", "json"} {
		code, out, errOut := run(t, c, "history", "-o", output)
		require.Equal(t, ExitOK, code, errOut)
		assert.NotContains(t, out, "\x1b", output)
		assert.NotContains(t, out, "\u009b", output)
		var got historyv1alpha1.PipelineRecordList
		require.NoError(t, yaml.Unmarshal([]byte(out), &got), output)
		require.Len(t, got.Items, 1)
		assert.Equal(t, hostile.Status.Steps[1].Message, got.Items[0].Status.Steps[1].Message, output)
	}

	// An error that quotes the API server: one line, escaped.
	_, sw, _ := historyClients()
	c.Stepwise = sw
	sw.PrependReactor("list", "pipelinerecords", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom\n\x1b[2Jfake prompt$ ")
	})
	code, _, errOut = run(t, c, "history")
	assert.Equal(t, ExitError, code)
	assert.Equal(t, "error: list pipelinerecords in namespace demo: boom \\x1b[2Jfake prompt$\n", errOut)
}

func TestRecordProgress(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*historyv1alpha1.PipelineRecord)
		want   string
	}{
		{name: "succeeded", want: "3/3 succeeded"},
		{name: "failed at a step", mutate: failedAtDrain, want: "1/3, failed at drain"},
		{name: "failed, the step from its phase", mutate: func(r *historyv1alpha1.PipelineRecord) {
			failedAtDrain(r)
			r.Status.CurrentStep = ""
		}, want: "1/3, failed at drain"},
		{name: "failed, no step says so", mutate: func(r *historyv1alpha1.PipelineRecord) {
			r.Status.Phase, r.Status.Steps = v1alpha1.PipelineFailed, nil
		}, want: "0/3, failed"},
		{name: "deleted while it ran", mutate: func(r *historyv1alpha1.PipelineRecord) {
			r.Status.Phase, r.Status.CurrentStep = v1alpha1.PipelineRunning, "retire"
			r.Status.Steps[2].Phase = v1alpha1.StepRunning
		}, want: "2/3, at retire"},
		{name: "torn down", mutate: func(r *historyv1alpha1.PipelineRecord) {
			r.Status.Phase = v1alpha1.PipelineDeleting
			r.Status.Steps[0].Phase, r.Status.Steps[1].Phase = v1alpha1.StepDeleted, v1alpha1.StepDeleted
		}, want: "1/3, 2 torn down"},
		{name: "never started", mutate: func(r *historyv1alpha1.PipelineRecord) {
			r.Status = v1alpha1.PipelineStatus{}
		}, want: "0/3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record("demo", "hello", "u", historyv1alpha1.RecordSucceeded, time.Hour)
			if tt.mutate != nil {
				tt.mutate(r)
			}
			assert.Equal(t, tt.want, recordProgress(r))
		})
	}
}

func TestPrintHistoryAges(t *testing.T) {
	now := t0.Add(400 * 24 * time.Hour)
	var records []historyv1alpha1.PipelineRecord
	for _, ago := range []time.Duration{5 * time.Second, 3*time.Minute + 20*time.Second, 7*time.Hour + 5*time.Minute, 400 * 24 * time.Hour} {
		r := record("demo", "hello", "u", historyv1alpha1.RecordSucceeded, 0)
		r.Finished = metav1.NewTime(now.Add(-ago))
		records = append(records, *r)
	}
	records = append(records, *record("demo", "hello", "u", historyv1alpha1.RecordSucceeded, 0, func(r *historyv1alpha1.PipelineRecord) {
		r.Finished = metav1.Time{}
	}))
	var b strings.Builder
	require.NoError(t, PrintHistory(&b, records, false, now))
	var ages []string
	for _, l := range tableLines(b.String())[1:] {
		ages = append(ages, strings.Fields(l)[5])
	}
	assert.Equal(t, []string{"5s", "3m20s", "7h5m", "400d", "<unknown>"}, ages, "as kubectl shows ages")
}

func TestHistoryCompletion(t *testing.T) {
	c, _ := fakeClients(completionObjects()...)
	clients := func() (*Clients, error) { return c, nil }
	got, directive := complete(t, clients, "-n", "demo", "history", "")
	assert.Empty(t, got, "pipelines with records may be gone: no names")
	assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive, "nor file names")
	got, _ = complete(t, clients, "-n", "demo", "history", "--state", "")
	assert.Equal(t, []string{"Succeeded", "Failed", "Deleted", "Orphaned", "Removed"}, got)
	got, _ = complete(t, clients, "-n", "demo", "history", "--trigger", "re")
	assert.Equal(t, []string{"retire-labelled"}, got)
}
