package historyapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	stepwisev1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/archive"
)

// Archive is what the API reads records from: the archive's store (*archive.Store).
type Archive interface {
	// Get returns the record named name in namespace, archive.ErrNotFound when none.
	Get(ctx context.Context, namespace, name string) (archive.Record, error)
	// List returns a page of records.
	List(ctx context.Context, o archive.ListOptions) (archive.ListResult, error)
	// Events returns the Events recorded for the pipeline of that UID, oldest first, at
	// most limit of them.
	Events(ctx context.Context, pipelineUID string, limit int) ([]archive.Event, error)
}

// maxEvents bounds the Events a record is served with: a pipeline that looped on an
// error for days must not make a response of unbounded size.
const maxEvents = 1000

// resource is the resource storage serves, for the errors it returns.
const resource = "pipelinerecords"

// storage serves the archive's records as pipelinerecords: get and list, nothing else.
// Records are written once by the operator and never change, so there is nothing to
// create, update, delete or watch.
type storage struct {
	archive Archive
	clock   clock.PassiveClock // the Table's ages are computed against it
}

var (
	_ rest.Storage              = (*storage)(nil)
	_ rest.Scoper               = (*storage)(nil)
	_ rest.Getter               = (*storage)(nil)
	_ rest.Lister               = (*storage)(nil)
	_ rest.TableConvertor       = (*storage)(nil)
	_ rest.SingularNameProvider = (*storage)(nil)
)

// newStorage returns storage reading from a.
func newStorage(a Archive, clk clock.PassiveClock) *storage {
	return &storage{archive: a, clock: clk}
}

func (s *storage) New() runtime.Object     { return &historyv1alpha1.PipelineRecord{} }
func (s *storage) NewList() runtime.Object { return &historyv1alpha1.PipelineRecordList{} }

// Destroy has nothing to release: the archive belongs to the caller of New.
func (s *storage) Destroy() {}

func (s *storage) NamespaceScoped() bool   { return true }
func (s *storage) GetSingularName() string { return "pipelinerecord" }

// Get returns a record with its pipeline's Events.
func (s *storage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	r, err := s.archive.Get(ctx, namespace, name)
	if errors.Is(err, archive.ErrNotFound) {
		return nil, apierrors.NewNotFound(historyv1alpha1.Resource(resource), name)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("read record %s/%s: %w", namespace, name, err))
	}
	obj := recordObject(klog.FromContext(ctx), r)
	events, err := s.archive.Events(ctx, r.UID, maxEvents)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("read the Events of record %s/%s: %w", namespace, name, err))
	}
	obj.Events = recordedEvents(events)
	return obj, nil
}

// List returns a page of records, without their Events: with them, a page of 500
// records would cost 500 more queries and, for pipelines with hundreds of Events each,
// tens of megabytes; a listing is for finding a record, whose Events a get then shows.
func (s *storage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	o, none, err := archiveListOptions(namespace, opts)
	if err != nil {
		return nil, err
	}
	list := &historyv1alpha1.PipelineRecordList{Items: []historyv1alpha1.PipelineRecord{}}
	if none {
		return list, nil
	}
	o.Limit, o.MaxBytes = pageBounds(o.Limit)
	res, err := s.archive.List(ctx, o)
	switch {
	case errors.Is(err, archive.ErrBadContinue):
		// The archive's tokens do not expire (a token is where the last page ended), so a
		// token it refuses was never one of its own: a bad request, as the API server
		// answers a continue token it cannot decode, rather than 410 Gone, which would
		// make client-go's pager start over without a limit.
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token %q: list again without it", opts.Continue))
	case errors.Is(err, archive.ErrUnsupportedField):
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%v; supported field selectors: %s", err, supportedFields))
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("list records in namespace %q: %w", namespace, err))
	}
	logger := klog.FromContext(ctx)
	list.Continue = res.Continue
	list.Items = make([]historyv1alpha1.PipelineRecord, 0, len(res.Records))
	for _, r := range res.Records {
		list.Items = append(list.Items, *recordObject(logger, r))
	}
	return list, nil
}

// A page of records holds at most maxPageRecords records and about maxPageBytes of
// them, whatever limit the request asks (none included), and says where the next page
// starts: a list of a million records, or of a few large ones, costs the operator (which
// also runs the engine) a bounded amount of memory. kubectl and client-go's pager follow
// continue; a client that asks for no limit and ignores continue gets the first page.
const (
	maxPageRecords = 500
	maxPageBytes   = 32 << 20
)

// pageBounds is the limit and byte bound of a page a request asked limit of (0: none).
func pageBounds(limit int64) (int64, int64) {
	if limit <= 0 || limit > maxPageRecords {
		limit = maxPageRecords
	}
	return limit, maxPageBytes
}

// supportedFields names the field selectors a list understands, for the error that
// refuses another.
const supportedFields = "metadata.name, metadata.namespace, " +
	historyv1alpha1.FieldPipelineName + ", " + historyv1alpha1.FieldPipelineUID + ", " + historyv1alpha1.FieldState + ", " +
	historyv1alpha1.FieldPhase + ", " + historyv1alpha1.FieldTrigger + ", " +
	historyv1alpha1.FieldObject + ", " + historyv1alpha1.FieldFinishedAfter + ", " +
	historyv1alpha1.FieldFinishedBefore + " (all with =)"

// archiveField tells whether the archive matches a field selector as an exact value: it
// takes the API's field names (archive.ListOptions.Fields).
func archiveField(field string) (string, bool) {
	switch field {
	case "metadata.name", historyv1alpha1.FieldPipelineName, historyv1alpha1.FieldPipelineUID,
		historyv1alpha1.FieldState, historyv1alpha1.FieldPhase, historyv1alpha1.FieldTrigger, historyv1alpha1.FieldObject:
		return field, true
	}
	return "", false
}

// fieldSupported tells whether a list understands a field selector.
func fieldSupported(field string) bool {
	switch field {
	case "metadata.namespace", historyv1alpha1.FieldFinishedAfter, historyv1alpha1.FieldFinishedBefore:
		return true
	}
	_, ok := archiveField(field)
	return ok
}

func unsupportedFieldError(field string) error {
	return apierrors.NewBadRequest(fmt.Sprintf("field selector %q is not supported on %s; supported: %s", field, resource, supportedFields))
}

// archiveListOptions translates a list request in namespace ("" for all) into the
// archive's options. none is true when the selectors cannot match a record (a field
// asked to equal two values, a namespace other than the request's): there is no need to
// ask the archive.
func archiveListOptions(namespace string, opts *metainternalversion.ListOptions) (o archive.ListOptions, none bool, err error) {
	o = archive.ListOptions{Namespace: namespace, Labels: labels.Everything()}
	if opts == nil {
		return o, false, nil
	}
	if opts.LabelSelector != nil {
		o.Labels = opts.LabelSelector
	}
	if opts.Limit < 0 {
		return o, false, apierrors.NewBadRequest(fmt.Sprintf("limit must not be negative, got %d", opts.Limit))
	}
	o.Limit = opts.Limit
	o.Continue = opts.Continue
	if opts.FieldSelector == nil {
		return o, false, nil
	}
	for _, req := range opts.FieldSelector.Requirements() {
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return o, false, apierrors.NewBadRequest(fmt.Sprintf("field selector %s: only = and == are supported on %s", req.Field+string(req.Operator)+req.Value, resource))
		}
		switch req.Field {
		case "metadata.namespace":
			switch {
			case o.Namespace == "":
				o.Namespace = req.Value
			case o.Namespace != req.Value:
				none = true
			}
		case historyv1alpha1.FieldFinishedAfter, historyv1alpha1.FieldFinishedBefore:
			t, err := time.Parse(time.RFC3339, req.Value)
			if err != nil {
				return o, false, apierrors.NewBadRequest(fmt.Sprintf("field selector %s: %q is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)", req.Field, req.Value))
			}
			// Both bounds hold: the later of two lower bounds, the earlier of two upper.
			if req.Field == historyv1alpha1.FieldFinishedAfter {
				if o.FinishedAfter.IsZero() || t.After(o.FinishedAfter) {
					o.FinishedAfter = t
				}
			} else if o.FinishedBefore.IsZero() || t.Before(o.FinishedBefore) {
				o.FinishedBefore = t
			}
		default:
			key, ok := archiveField(req.Field)
			if !ok {
				return o, false, unsupportedFieldError(req.Field)
			}
			if o.Fields == nil {
				o.Fields = map[string]string{}
			}
			if prev, ok := o.Fields[key]; ok && prev != req.Value {
				none = true
			}
			o.Fields[key] = req.Value
		}
	}
	return o, none, nil
}

// recordObject is the object of a record, without Events. The record's Body gives the
// spec and status; a Body that does not decode leaves them empty, logged, rather than
// fail a whole list for one record.
func recordObject(logger klog.Logger, r archive.Record) *historyv1alpha1.PipelineRecord {
	obj := &historyv1alpha1.PipelineRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:      r.Name,
			Namespace: r.Namespace,
			Labels:    r.Labels,
			UID:       recordUID(r),
			// Records never change: no resourceVersion to tell versions apart, and no
			// watch to resume from one.
			CreationTimestamp: metav1.NewTime(r.Archived),
		},
		Pipeline: historyv1alpha1.PipelineReference{
			Name:       r.Pipeline,
			UID:        r.UID,
			Generation: r.Generation,
			Created:    metav1.NewTime(r.Created),
		},
		State:    historyv1alpha1.RecordState(r.State),
		Phase:    stepwisev1alpha1.PipelinePhase(r.Phase),
		Trigger:  r.Trigger,
		Object:   r.Object,
		Creator:  r.Creator,
		Finished: metav1.NewTime(r.Finished),
	}
	if len(r.Body) > 0 {
		var p stepwisev1alpha1.Pipeline
		if err := json.Unmarshal(r.Body, &p); err != nil {
			logger.Error(err, "Archived pipeline does not decode; serving its record without spec and status",
				"record", klog.KRef(r.Namespace, r.Name))
		} else {
			obj.Spec = p.Spec
			obj.Status = p.Status
		}
	}
	return obj
}

// recordUID is a record's UID: derived from what identifies the record, so that the
// same record has the same UID in every response, from every replica. The name does
// not do: it keeps only 8 digits of the pipeline's UID.
func recordUID(r archive.Record) types.UID {
	name := "https://history.stepwise.dev/pipelinerecords/" + r.UID + "/" + strconv.FormatInt(r.Generation, 10) + "/" + string(r.State)
	return types.UID(uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)).String())
}

// recordedEvents are the archive's Events, in its order.
func recordedEvents(events []archive.Event) []historyv1alpha1.RecordedEvent {
	if len(events) == 0 {
		return nil
	}
	out := make([]historyv1alpha1.RecordedEvent, 0, len(events))
	for _, e := range events {
		out = append(out, historyv1alpha1.RecordedEvent{
			Type:    e.Type,
			Reason:  e.Reason,
			Message: e.Message,
			Time:    metav1.NewTime(e.Time),
			Count:   e.Count,
		})
	}
	return out
}

// tableColumns are the columns of kubectl get pipelinerecords.
func tableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "The record's name: <pipeline>.<UID digits>.<generation>.<state>."},
		{Name: "Pipeline", Type: "string", Description: "The pipeline the record is of."},
		{Name: "State", Type: "string", Description: "What happened to the pipeline: Succeeded, Failed, Deleted, Orphaned or Removed."},
		{Name: "Phase", Type: "string", Description: "The pipeline's phase in that state."},
		{Name: "Trigger", Type: "string", Description: "The PipelineTrigger that made the pipeline, if one did."},
		{Name: "Object", Type: "string", Description: "The object the trigger's pipeline was for."},
		{Name: "Finished", Type: "string", Description: "How long ago the pipeline reached the state."},
	}
}

// ConvertToTable shows records as kubectl get does. Each row carries its object; the
// API server keeps it, its metadata or nothing, as the request's includeObject asks.
func (s *storage) ConvertToTable(_ context.Context, obj runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if opts, ok := tableOptions.(*metav1.TableOptions); !ok || !opts.NoHeaders {
		table.ColumnDefinitions = tableColumns()
	}
	now := s.clock.Now()
	switch o := obj.(type) {
	case *historyv1alpha1.PipelineRecordList:
		table.ResourceVersion = o.ResourceVersion
		table.Continue = o.Continue
		table.RemainingItemCount = o.RemainingItemCount
		table.Rows = make([]metav1.TableRow, 0, len(o.Items))
		for i := range o.Items {
			table.Rows = append(table.Rows, tableRow(&o.Items[i], now))
		}
	case *historyv1alpha1.PipelineRecord:
		table.ResourceVersion = o.ResourceVersion
		table.Rows = []metav1.TableRow{tableRow(o, now)}
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("show a %T as a table of %s: not a record", obj, resource))
	}
	return table, nil
}

func tableRow(r *historyv1alpha1.PipelineRecord, now time.Time) metav1.TableRow {
	return metav1.TableRow{
		Cells: []any{
			r.Name, r.Pipeline.Name, string(r.State), string(r.Phase), r.Trigger, r.Object,
			age(r.Finished.Time, now),
		},
		Object: runtime.RawExtension{Object: r},
	}
}

// age is how long before now t was, as kubectl shows ages.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
