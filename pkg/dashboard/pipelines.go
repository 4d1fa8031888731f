package dashboard

import (
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// pipelineSummary is a row of the pipelines table.
type pipelineSummary struct {
	Namespace         string       `json:"namespace"`
	Name              string       `json:"name"`
	Phase             string       `json:"phase"`
	CurrentStep       string       `json:"currentStep"`
	Progress          string       `json:"progress"`
	Template          string       `json:"template"`
	Trigger           string       `json:"trigger"`
	CreationTimestamp metav1.Time  `json:"creationTimestamp"`
	StartTime         *metav1.Time `json:"startTime"`
	CompletionTime    *metav1.Time `json:"completionTime"`
	Steps             int          `json:"steps"`
	// Message and Reason are the Ready condition's.
	Message string `json:"message"`
	Reason  string `json:"reason"`
	// What the actions need: retry only a failed pipeline, suspend or resume.
	Suspend        bool `json:"suspend"`
	Failed         bool `json:"failed"`
	RetryRequested bool `json:"retryRequested"`
	Deleting       bool `json:"deleting"`
	DryRun         bool `json:"dryRun"`
}

type pipelineList struct {
	Items []pipelineSummary `json:"items"`
	// Total counts the pipelines that pass every filter; Counts those of each phase that
	// pass the namespace filter only, for the phase chips.
	Total      int            `json:"total"`
	Counts     map[string]int `json:"counts"`
	Namespaces []string       `json:"namespaces"`
}

// listPipelines is GET /api/pipelines: one filtered, sorted page.
func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, &s.caches.pipelines) {
		return
	}
	q, err := parsePipelineQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var all []*v1alpha1.Pipeline
	if q.namespace != "" {
		all, err = s.caches.pipelineLister.Pipelines(q.namespace).List(labels.Everything())
	} else {
		all, err = s.caches.pipelineLister.List(labels.Everything())
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "list pipelines from the cache: "+err.Error())
		return
	}
	counts := make(map[string]int, 8)
	for _, p := range []v1alpha1.PipelinePhase{v1alpha1.PipelinePending, v1alpha1.PipelineRunning, v1alpha1.PipelineSucceeded,
		v1alpha1.PipelineFailed, v1alpha1.PipelineSuspended, v1alpha1.PipelineDeleting, v1alpha1.PipelinePlanned} {
		counts[string(p)] = 0
	}
	// The lister's slice is ours: filter it in place. Only the page is summarised.
	matched := all[:0]
	for _, p := range all {
		phase := phaseOf(p)
		counts[phase]++
		if q.matches(p, phase) {
			matched = append(matched, p)
		}
	}
	sortPipelines(matched, q.sort)
	start := min(q.offset, len(matched))
	page := matched[start:min(start+q.limit, len(matched))]
	out := pipelineList{Items: make([]pipelineSummary, 0, len(page)), Total: len(matched), Counts: counts}
	for _, p := range page {
		out.Items = append(out.Items, summarizePipeline(p))
	}
	out.Namespaces = s.caches.pipelines.informer.GetIndexer().ListIndexFuncValues(cache.NamespaceIndex)
	slices.Sort(out.Namespaces)
	writeJSON(w, http.StatusOK, out)
}

func summarizePipeline(p *v1alpha1.Pipeline) pipelineSummary {
	sum := pipelineSummary{
		Namespace:         p.Namespace,
		Name:              p.Name,
		Phase:             phaseOf(p),
		CurrentStep:       p.Status.CurrentStep,
		Progress:          p.Status.Progress,
		Template:          templateOf(p),
		Trigger:           p.Labels[v1alpha1.LabelTrigger],
		CreationTimestamp: p.CreationTimestamp,
		StartTime:         p.Status.StartTime,
		CompletionTime:    p.Status.CompletionTime,
		Steps:             len(p.StepsRun()),
		Suspend:           p.Spec.Suspend,
		Failed:            p.Failed(),
		RetryRequested:    p.RetryRequested(),
		Deleting:          p.DeletionTimestamp != nil,
		DryRun:            p.Spec.DryRun,
	}
	switch {
	case sum.Steps > 0:
	case p.Status.Template != nil: // a template's pipeline, started
		sum.Steps = len(p.Status.Template.Steps)
	default:
		sum.Steps = len(p.Status.Steps)
	}
	if ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
		sum.Message, sum.Reason = ready.Message, ready.Reason
	}
	return sum
}

// eventSummary is one Event of an object, as `kubectl describe` shows it.
type eventSummary struct {
	Type           string      `json:"type"`
	Reason         string      `json:"reason"`
	Message        string      `json:"message"`
	Count          int32       `json:"count"`
	FirstTimestamp metav1.Time `json:"firstTimestamp"`
	LastTimestamp  metav1.Time `json:"lastTimestamp"`
}

// objectDetail is the answer of GET /api/pipelines/{ns}/{name} ("pipeline") and of GET
// /api/triggers/{ns}/{name} ("trigger").
type objectDetail struct {
	Pipeline *v1alpha1.Pipeline        `json:"pipeline,omitempty"`
	Trigger  *v1alpha1.PipelineTrigger `json:"trigger,omitempty"`
	// Events are newest first. EventsError says why there are none to show when the user
	// may not list Events.
	Events      []eventSummary `json:"events"`
	EventsError string         `json:"eventsError,omitempty"`
}

// getPipeline is GET /api/pipelines/{namespace}/{name}: the pipeline as it is (without
// managedFields) and its Events.
func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, &s.caches.pipelines) {
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	p, err := s.caches.pipelineLister.Pipelines(ns).Get(name)
	if err != nil {
		writeCacheError(w, "pipeline", ns, name, err)
		return
	}
	p = p.DeepCopy() // the cache's copy is shared: never write to it
	p.APIVersion, p.Kind = v1alpha1.SchemeGroupVersion.String(), kindPipeline
	out := objectDetail{Pipeline: p}
	out.Events, out.EventsError = s.eventsOf(&s.caches.pipelineEvents, kindPipeline, ns, name, string(p.UID))
	writeJSON(w, http.StatusOK, out)
}

// eventsOf summarises the cached Events about an object, newest first.
func (s *Server) eventsOf(res *resource, kind, ns, name, uid string) ([]eventSummary, string) {
	out := []eventSummary{}
	if res.forbidden != "" {
		return out, res.forbidden
	}
	events, err := eventsAbout(res, kind, ns, name, uid)
	if err != nil {
		return out, err.Error()
	}
	for _, e := range events {
		out = append(out, summarizeEvent(e))
	}
	slices.SortFunc(out, func(a, b eventSummary) int {
		if c := b.LastTimestamp.Compare(a.LastTimestamp.Time); c != 0 {
			return c
		}
		return b.FirstTimestamp.Compare(a.FirstTimestamp.Time)
	})
	return out, ""
}

func summarizeEvent(e *corev1.Event) eventSummary {
	sum := eventSummary{
		Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count,
		FirstTimestamp: e.FirstTimestamp, LastTimestamp: e.LastTimestamp,
	}
	// Events of the events.k8s.io API have an eventTime and a series instead.
	if e.Series != nil {
		sum.Count = e.Series.Count
		if sum.LastTimestamp.IsZero() {
			sum.LastTimestamp = metav1.Time{Time: e.Series.LastObservedTime.Time}
		}
	}
	if sum.FirstTimestamp.IsZero() {
		sum.FirstTimestamp = metav1.Time{Time: e.EventTime.Time}
	}
	if sum.FirstTimestamp.IsZero() {
		sum.FirstTimestamp = e.CreationTimestamp
	}
	if sum.LastTimestamp.IsZero() {
		sum.LastTimestamp = sum.FirstTimestamp
	}
	sum.Count = max(sum.Count, 1)
	return sum
}
