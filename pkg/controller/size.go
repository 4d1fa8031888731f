package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
)

// maxObjectBytes is what a pipeline may weigh, spec and status, as a status write sends
// it (JSON, as etcd stores custom resources): the API server stores the whole object in
// one etcd request, and etcd refuses one over 1.5 MiB (its default --max-request-bytes).
// The rest is headroom for what the server keeps beside what we send: managedFields and
// the annotations our cached copy drops (kubectl's last-applied copy of the spec).
const maxObjectBytes = 1 << 20

// etcdTooLarge is what etcd answers a request over its limit; the API server passes it on
// as a 500 whose reason is unknown or InternalError, depending on the version
// (kubernetes/kubernetes#112152).
const etcdTooLarge = "request is too large"

// statusTooLarge tells whether a write was refused for the size of the object: by the API
// server (413, over its 3 MiB body limit) or by etcd.
func statusTooLarge(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(err.Error(), etcdTooLarge)
}

// shedCounts is what shrinkToFit left out of a status.
type shedCounts struct {
	// Rows of plans' details.
	Rows int
	// Warnings of plans.
	Warnings int
}

func (s shedCounts) any() bool { return s.Rows > 0 || s.Warnings > 0 }

// shrinkToFit leaves out of p's status what it can spare until p, as a status write sends
// it, weighs at most limit bytes: first the detail rows of plans, then their warnings,
// the largest first, saying in each plan's summary what it lost. What teardown and later
// steps read (outputs, hook state, run records, status.template) is never left out, so
// the result may still be over the limit. It returns p's size after and what it left out.
// Plans are replaced, never modified: other copies of the status may share them.
func shrinkToFit(p *v1alpha1.Pipeline, limit int) (int, shedCounts, error) {
	size, err := jsonSize(p)
	if err != nil {
		return 0, shedCounts{}, fmt.Errorf("measure pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	if size <= limit {
		return size, shedCounts{}, nil
	}
	var planned []*v1alpha1.StepStatus
	for _, list := range [][]v1alpha1.StepStatus{p.Status.Steps, p.Status.RetiredSteps} {
		for i := range list {
			if list[i].Plan != nil {
				planned = append(planned, &list[i])
			}
		}
	}
	var total shedCounts
	lost := make(map[*v1alpha1.StepStatus]planLoss, len(planned))
	for _, part := range []planPart{planRows, planWarnings} {
		for _, s := range largestFirst(planned, part) {
			if size <= limit {
				return size, total, nil
			}
			loss, ok := lost[s]
			if !ok {
				loss.summary = s.Plan.Summary
			}
			plan := *s.Plan
			if part == planRows {
				loss.Rows += len(plan.Details)
				total.Rows += len(plan.Details)
				plan.Details = nil
			} else {
				loss.Warnings += len(plan.Warnings)
				total.Warnings += len(plan.Warnings)
				plan.Warnings = nil
			}
			plan.Summary = loss.summaryWith()
			lost[s] = loss
			// A plan's JSON is a part of the object's: the difference is exact.
			size -= mustJSONSize(s.Plan) - mustJSONSize(&plan)
			s.Plan = &plan
		}
	}
	return size, total, nil
}

// planPart is a part of a plan that shrinkToFit may leave out.
type planPart int

const (
	planRows planPart = iota
	planWarnings
)

// of is the part of plan p, and how many items it has.
func (part planPart) of(p *v1alpha1.StepPlan) (any, int) {
	if part == planRows {
		return p.Details, len(p.Details)
	}
	return p.Warnings, len(p.Warnings)
}

// largestFirst is the steps whose plan has the part, the largest part first; equal parts
// stay in status order.
func largestFirst(steps []*v1alpha1.StepStatus, part planPart) []*v1alpha1.StepStatus {
	type sized struct {
		s    *v1alpha1.StepStatus
		size int
	}
	var out []sized
	for _, s := range steps {
		if items, n := part.of(s.Plan); n > 0 {
			out = append(out, sized{s, mustJSONSize(items)})
		}
	}
	slices.SortStableFunc(out, func(a, b sized) int { return cmp.Compare(b.size, a.size) })
	steps = make([]*v1alpha1.StepStatus, len(out))
	for i, o := range out {
		steps[i] = o.s
	}
	return steps
}

// planLoss is what shrinkToFit left out of one plan, and its summary as it was.
type planLoss struct {
	shedCounts
	summary string
}

// summaryWith is the plan's summary saying what was left out, within the summary's bound.
// TODO: a typed field of StepPlan (e.g. omitted: {details, warnings}) instead of text.
func (l planLoss) summaryWith() string {
	var parts []string
	if l.Rows > 0 {
		parts = append(parts, fmt.Sprintf("%d rows", l.Rows))
	}
	if l.Warnings > 0 {
		parts = append(parts, fmt.Sprintf("%d warnings", l.Warnings))
	}
	note := " [" + strings.Join(parts, " and ") + " left out: the status is over its size limit]"
	return contract.Truncate(l.summary, contract.MaxPlanText-len(note)) + note
}

// jsonSize is the size of v as a write sends it.
func jsonSize(v any) (int, error) {
	data, err := json.Marshal(v)
	return len(data), err
}

// mustJSONSize is jsonSize of parts of a pipeline that already marshalled whole.
func mustJSONSize(v any) int {
	n, _ := jsonSize(v)
	return n
}

// keepUnderMaxSize keeps pipeline p, the sync's status in it, within maxObjectBytes as far as
// it can (see shrinkToFit), and says in a Warning Event what it left out.
func (ps *pipelineSync) keepUnderMaxSize(ctx context.Context, p *v1alpha1.Pipeline) error {
	size, shed, err := shrinkToFit(p, maxObjectBytes)
	if err != nil {
		return err
	}
	*ps.status = p.Status // what is written is what the sync did
	if shed.any() {
		ps.record(statusOverBudget(shed, maxObjectBytes))
	}
	if size > maxObjectBytes {
		// Nothing more can go; the API server may still take it, or refuse it (refuseTooLarge).
		klog.FromContext(ctx).Info("Pipeline over its size limit", "pipeline", klog.KObj(p), "bytes", size, "limit", maxObjectBytes)
	}
	return nil
}

// refuseTooLarge fails the steps and retired runs this sync changed, when the API server
// refused their status for its size, carrying only what they had before the sync (and
// their run records), so that the next write is small and their hooks do not run again.
// It returns false when nothing changed.
func (ps *pipelineSync) refuseTooLarge() bool {
	failed := ps.failChangedSteps(true, v1alpha1.ReasonStatusTooLarge, func(hook v1alpha1.Hook) string {
		return fmt.Sprintf("the API server refused the status that hook %s produced: the pipeline, spec and status, is too large to store; "+
			"it is not run again: make what the executor returns or the pipeline smaller, then retry (annotate %s)", hook, v1alpha1.RetryAnnotation)
	})
	if len(failed) == 0 {
		return false
	}
	ps.record(statusRefusedTooLarge(failed))
	return true
}
