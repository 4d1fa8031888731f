package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe"
	historyclient "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/typed/history/v1alpha1"
)

// defaultHistoryLimit is how many records history prints unless --limit says otherwise.
const defaultHistoryLimit = 100

// recordStates are the states a record keeps, for --state.
var recordStates = []historyv1alpha1.RecordState{
	historyv1alpha1.RecordSucceeded, historyv1alpha1.RecordFailed, historyv1alpha1.RecordDeleted,
	historyv1alpha1.RecordOrphaned, historyv1alpha1.RecordRemoved,
}

// historyOptions are the flags of history.
type historyOptions struct {
	allNamespaces bool
	state         string
	trigger       string
	object        string
	selector      string
	since         time.Duration
	limit         int64
	output        string
}

func newHistoryCommand(o *options) *cobra.Command {
	h := historyOptions{limit: defaultHistoryLimit}
	cmd := &cobra.Command{
		Use:   "history [PIPELINE]",
		Short: "List the archive's records of pipelines: what succeeded, failed or was deleted",
		Long: `List the records the archive keeps of the pipelines of a namespace (or of every namespace
with -A), read through the history API (pipelinerecords.history.stepwise.dev, served by the
operator when it archives: see docs/history.md). Each record is one state of one pipeline:
Succeeded, Failed, Deleted, Orphaned or Removed. They come in the order they were written,
the newest last; the pipelines themselves may be long gone.

Name a PIPELINE to see only its records; when they are all of one pipeline (pipelines of
one name that lived one after the other have different UIDs), the steps and the Events of
its last record follow the table.

--state, --trigger, --object and --since are field selectors, -l a label selector on the
pipelines' labels, all answered by the archive. --limit bounds how many records are printed
(0: all of them); the oldest come first, so narrow with --since to see the latest.
kubectl get pipelinerecord RECORD -o yaml shows one record whole.`,
		Example: `  kubectl stepwise history -n node-ops
  kubectl stepwise history retire-node-3 -n node-ops
  kubectl stepwise history -A --state Failed --since 24h
  kubectl stepwise history -n node-ops --trigger retire-labelled --object node-3 -o yaml`,
		Args: cobra.MaximumNArgs(1),
		// Pipelines with records may be gone: no names to complete.
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, c, err := o.scopeFor(h.output)
			if err != nil {
				return err
			}
			if h.allNamespaces {
				ns = metav1.NamespaceAll
			}
			pipeline := ""
			if len(args) == 1 {
				pipeline = args[0]
			}
			return h.run(cmd.Context(), o, c.Stepwise.HistoryV1alpha1().PipelineRecords(ns), ns, pipeline, c.now())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&h.allNamespaces, "all-namespaces", "A", false, "List the records of every namespace you may read, not only the current one.")
	f.StringVar(&h.state, "state", "", "Only records of this state: Succeeded, Failed, Deleted, Orphaned or Removed.")
	f.StringVar(&h.trigger, "trigger", "", "Only records of pipelines this PipelineTrigger made.")
	f.StringVar(&h.object, "object", "", "Only records of pipelines a trigger made for this object (namespace/name, or name).")
	f.StringVarP(&h.selector, "selector", "l", "", "Label selector on the pipelines' labels (e.g. -l team=blue).")
	f.DurationVar(&h.since, "since", 0, "Only records of the states reached in this last while (e.g. 24h).")
	f.Int64Var(&h.limit, "limit", defaultHistoryLimit, "Print at most this many records (0: all of them), following the archive's pages.")
	f.StringVarP(&h.output, "output", "o", "", "Output format: json or yaml. Default: a table.")
	states := make([]cobra.Completion, 0, len(recordStates))
	for _, s := range recordStates {
		states = append(states, string(s))
	}
	completeFlag(cmd, "state", cobra.FixedCompletions(states, cobra.ShellCompDirectiveNoFileComp))
	completeFlag(cmd, "trigger", completeNames(o, triggerNames))
	return cmd
}

// run lists the records and prints them.
func (h *historyOptions) run(ctx context.Context, o *options, records historyclient.PipelineRecordInterface, ns, pipeline string, now time.Time) error {
	opts, err := h.listOptions(pipeline, now)
	if err != nil {
		return err
	}
	list, more, err := listRecords(ctx, records, opts, h.limit)
	if err != nil {
		return historyError(err, "list", ns)
	}
	moreNote := func() {
		if more {
			_, _ = fmt.Fprintf(o.streams.ErrOut, "more records than --limit %d: raise --limit (0 lists them all), or narrow with --since, --state or -l\n", h.limit)
		}
	}
	if h.output != "" {
		err := printRecordList(o.streams.Out, list, h.output)
		moreNote()
		return err
	}
	if len(list.Items) == 0 {
		_, _ = fmt.Fprintln(o.streams.ErrOut, noRecords(ns, pipeline))
		return nil
	}
	if err := PrintHistory(o.streams.Out, list.Items, h.allNamespaces, now); err != nil {
		return err
	}
	// Under the table it is about, before the details of a record.
	moreNote()
	if pipeline == "" {
		return nil
	}
	if uids := pipelineUIDs(list.Items); len(uids) > 1 {
		_, _ = fmt.Fprintf(o.streams.Out, "\nThe records are of %d pipelines named %s (UIDs %s): kubectl get pipelinerecord RECORD -o yaml shows one.\n",
			len(uids), termsafe.OneLine(pipeline, 0), termsafe.OneLine(strings.Join(uids, ", "), 0))
		return nil
	}
	// A list leaves the Events out: a get has them.
	last := list.Items[len(list.Items)-1]
	r, err := records.Get(ctx, last.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("record %s is no longer in the archive: list again (%w)", last.Name, err)
		}
		return historyError(err, "get", last.Namespace)
	}
	_, _ = fmt.Fprintln(o.streams.Out)
	return PrintRecord(o.streams.Out, r)
}

// listOptions are the selectors of the flags, and of PIPELINE when one is named.
func (h *historyOptions) listOptions(pipeline string, now time.Time) (metav1.ListOptions, error) {
	if h.limit < 0 {
		return metav1.ListOptions{}, fmt.Errorf("--limit must not be negative, got %d", h.limit)
	}
	if h.since < 0 {
		return metav1.ListOptions{}, fmt.Errorf("--since must be positive, got %s", h.since)
	}
	var terms []fields.Selector
	add := func(field, value string) {
		if value != "" {
			terms = append(terms, fields.OneTermEqualSelector(field, value))
		}
	}
	add(historyv1alpha1.FieldPipelineName, pipeline)
	state, err := recordState(h.state)
	if err != nil {
		return metav1.ListOptions{}, err
	}
	add(historyv1alpha1.FieldState, state)
	add(historyv1alpha1.FieldTrigger, h.trigger)
	add(historyv1alpha1.FieldObject, h.object)
	if h.since > 0 {
		add(historyv1alpha1.FieldFinishedAfter, now.Add(-h.since).UTC().Format(time.RFC3339))
	}
	opts := metav1.ListOptions{LabelSelector: h.selector}
	if len(terms) > 0 {
		opts.FieldSelector = fields.AndSelectors(terms...).String()
	}
	return opts, nil
}

// recordState is the state --state names, in the API's spelling (--state failed is
// Failed); "" for none.
func recordState(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	names := make([]string, 0, len(recordStates))
	for _, state := range recordStates {
		if strings.EqualFold(s, string(state)) {
			return string(state), nil
		}
		names = append(names, string(state))
	}
	return "", fmt.Errorf("--state %q is no state a record keeps: use one of %s", s, strings.Join(names, ", "))
}

// listRecords lists the records opts select, following continue until it has limit of
// them (0: until the last page). more tells whether the archive has more than it returns.
func listRecords(ctx context.Context, records historyclient.PipelineRecordInterface, opts metav1.ListOptions, limit int64) (*historyv1alpha1.PipelineRecordList, bool, error) {
	all := &historyv1alpha1.PipelineRecordList{}
	for {
		if limit > 0 {
			opts.Limit = limit - int64(len(all.Items))
		}
		page, err := records.List(ctx, opts)
		if err != nil {
			return nil, false, err
		}
		all.Items = append(all.Items, page.Items...)
		all.ResourceVersion, all.Continue, all.RemainingItemCount = page.ResourceVersion, page.Continue, page.RemainingItemCount
		if page.Continue == "" || (limit > 0 && int64(len(all.Items)) >= limit) {
			break
		}
		opts.Continue = page.Continue
	}
	more := all.Continue != ""
	// A server that pages by no limit may return more than asked.
	if limit > 0 && int64(len(all.Items)) > limit {
		all.Items, more = all.Items[:limit], true
	}
	return all, more, nil
}

// historyError says what a user can do about the errors of the history API they will
// meet: an API not served, and a request RBAC refuses. verb is the request's; ns its
// namespace, "" for all.
func historyError(err error, verb, ns string) error {
	where := "namespace " + ns
	ask := "ask for get/list on pipelinerecords.history.stepwise.dev"
	if ns == metav1.NamespaceAll {
		where, ask = "all namespaces", ask+" in every namespace (a ClusterRole), or leave out -A"
	}
	switch {
	case apierrors.IsNotFound(err):
		// The aggregator answers 404 for a group no APIService registers.
		return fmt.Errorf("the history API is not installed: the operator serves it with --archive-dsn-file and --history-secure-port (docs/history.md) (%w)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not %s pipelinerecords in %s: %s (%w)", verb, where, ask, err)
	case apierrors.IsServiceUnavailable(err):
		// The APIService is registered and the operator does not answer.
		return fmt.Errorf("the history API does not answer: is the operator running, and its APIService Available "+
			"(kubectl get apiservice v1alpha1.history.stepwise.dev)? (%w)", err)
	}
	return fmt.Errorf("%s pipelinerecords in %s: %w", verb, where, err)
}

// noRecords is what history says when the archive has no record to show.
func noRecords(ns, pipeline string) string {
	where := "namespace " + ns
	if ns == metav1.NamespaceAll {
		where = "any namespace"
	}
	if pipeline != "" {
		return fmt.Sprintf("No records of pipeline %s in %s.", termsafe.OneLine(pipeline, 0), termsafe.OneLine(where, 0))
	}
	return fmt.Sprintf("No pipeline records in %s.", termsafe.OneLine(where, 0))
}

// printRecordList prints the records as kubectl get -o json|yaml would, with control
// characters escaped (see termsafe.Encode).
func printRecordList(w io.Writer, list *historyv1alpha1.PipelineRecordList, output string) error {
	list = list.DeepCopy()
	// Objects decoded by a typed client have no apiVersion and kind.
	list.SetGroupVersionKind(historyv1alpha1.SchemeGroupVersion.WithKind("PipelineRecordList"))
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(historyv1alpha1.SchemeGroupVersion.WithKind("PipelineRecord"))
		list.Items[i].ManagedFields = nil
	}
	data, err := termsafe.Encode(list, output)
	if err == nil {
		_, err = w.Write(data)
	}
	if err != nil {
		return fmt.Errorf("print records: %w", err)
	}
	return nil
}

// PrintHistory writes a table of records, one row each, with the namespace's column when
// allNamespaces; ages are against now. Every cell goes through termsafe.OneLine.
func PrintHistory(w io.Writer, records []historyv1alpha1.PipelineRecord, allNamespaces bool, now time.Time) error {
	tw := printers.GetNewTabWriter(w)
	header := "PIPELINE\tSTATE\tPHASE\tTRIGGER\tOBJECT\tFINISHED\tSTEPS\tRECORD"
	if allNamespaces {
		header = "NAMESPACE\t" + header
	}
	_, _ = fmt.Fprintln(tw, header)
	for i := range records {
		r := &records[i]
		row := []string{
			r.Pipeline.Name, string(r.State), orDash(string(r.Phase)), orDash(r.Trigger), orDash(r.Object),
			age(r.Finished, now), recordProgress(r), r.Name,
		}
		if allNamespaces {
			row = append([]string{r.Namespace}, row...)
		}
		for i := range row {
			row[i] = termsafe.OneLine(row[i], maxMessage)
		}
		_, _ = fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write records: %w", err)
	}
	return nil
}

// age is how long ago t was, as kubectl shows ages.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// recordSteps are the steps of the record's pipeline: its spec's, or its template's.
func recordSteps(r *historyv1alpha1.PipelineRecord) []v1alpha1.Step {
	p := v1alpha1.Pipeline{Spec: r.Spec, Status: r.Status}
	return p.StepsRun()
}

// recordProgress says how far the pipeline got: "3/3 succeeded", "2/3, failed at drain",
// "0/3, 3 torn down", "1/3, at build".
func recordProgress(r *historyv1alpha1.PipelineRecord) string {
	total := max(len(recordSteps(r)), len(r.Status.Steps))
	succeeded, tornDown, failed := 0, 0, ""
	for _, s := range r.Status.Steps {
		switch s.Phase {
		case v1alpha1.StepSucceeded:
			succeeded++
		case v1alpha1.StepDeleted:
			tornDown++
		case v1alpha1.StepFailed:
			if failed == "" {
				failed = s.Name
			}
		}
	}
	progress := fmt.Sprintf("%d/%d", succeeded, total)
	switch {
	case r.Status.Phase == v1alpha1.PipelineSucceeded:
		return progress + " succeeded"
	case r.Status.Phase == v1alpha1.PipelineFailed:
		// CurrentStep is the step that failed.
		if r.Status.CurrentStep != "" {
			failed = r.Status.CurrentStep
		}
		if failed == "" {
			return progress + ", failed"
		}
		return progress + ", failed at " + failed
	case tornDown > 0:
		return fmt.Sprintf("%s, %d torn down", progress, tornDown)
	case r.Status.CurrentStep != "":
		return progress + ", at " + r.Status.CurrentStep
	}
	return progress
}

// pipelineUIDs are the UIDs of the pipelines the records are of, in order.
func pipelineUIDs(records []historyv1alpha1.PipelineRecord) []string {
	var uids []string
	seen := map[string]bool{}
	for _, r := range records {
		if !seen[r.Pipeline.UID] {
			seen[r.Pipeline.UID] = true
			uids = append(uids, r.Pipeline.UID)
		}
	}
	return uids
}

// PrintRecord writes one record: what it is of, its steps as status shows them (their
// durations against the time the record was made), and its Events.
func PrintRecord(w io.Writer, r *historyv1alpha1.PipelineRecord) error {
	// A pipeline as it was, for status's step table.
	p := &v1alpha1.Pipeline{Spec: *r.Spec.DeepCopy(), Status: *r.Status.DeepCopy()}
	p.Spec.Steps = recordSteps(r)
	blocks := []func(io.Writer){
		func(w io.Writer) { recordSummary(w, r) },
		func(w io.Writer) { stepTable(w, p, r.Finished.Time) },
		func(w io.Writer) { eventTable(w, r.Events) },
	}
	for _, write := range blocks {
		tw := printers.GetNewTabWriter(w)
		write(tw)
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	return nil
}

// recordSummary writes the record's lines above its steps, every value through
// termsafe.OneLine.
func recordSummary(w io.Writer, r *historyv1alpha1.PipelineRecord) {
	line := func(key, value string) { _, _ = fmt.Fprintf(w, "%s:\t%s\n", key, termsafe.OneLine(value, 0)) }
	line("Record", r.Name)
	line("Pipeline", fmt.Sprintf("%s/%s (UID %s, generation %d)", r.Namespace, r.Pipeline.Name, r.Pipeline.UID, r.Pipeline.Generation))
	line("State", fmt.Sprintf("%s (phase %s) at %s", r.State, orDash(string(r.Phase)), rfc3339(&r.Finished)))
	if r.Trigger != "" {
		line("Trigger", fmt.Sprintf("%s (object %s)", r.Trigger, orDash(r.Object)))
	}
	if r.Creator != "" {
		line("Creator", r.Creator)
	}
	_, _ = fmt.Fprintln(w)
}

// eventTable writes the Events of a record, after a blank line: when, type, reason and
// message, every cell through termsafe.OneLine.
func eventTable(w io.Writer, events []historyv1alpha1.RecordedEvent) {
	if len(events) == 0 {
		_, _ = fmt.Fprintln(w, "\nEvents:\tnone recorded")
		return
	}
	_, _ = fmt.Fprintln(w, "\nEvents:")
	_, _ = fmt.Fprintln(w, "  TIME\tTYPE\tREASON\tMESSAGE")
	for i := range events {
		e := &events[i]
		msg := termsafe.OneLine(e.Message, maxMessage)
		if e.Count > 1 {
			msg += fmt.Sprintf(" (x%d)", e.Count)
		}
		_, _ = fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", rfc3339(&e.Time), termsafe.OneLine(e.Type, 0), termsafe.OneLine(e.Reason, 0), msg)
	}
}
