package dashboard

import (
	"net/http"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/catalog"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/trigger/rules"
)

// What the cluster offers to run pipelines with: templates, triggers, and the operator's
// executors.

type templateParam struct {
	Name        string  `json:"name"`
	Required    bool    `json:"required"`
	Default     *string `json:"default"`
	Description string  `json:"description"`
}

type templateStep struct {
	Name     string `json:"name"`
	Executor string `json:"executor"`
}

type templateSummary struct {
	Namespace         string          `json:"namespace"`
	Name              string          `json:"name"`
	CreationTimestamp metav1.Time     `json:"creationTimestamp"`
	Params            []templateParam `json:"params"`
	Steps             []templateStep  `json:"steps"`
	OnFailure         string          `json:"onFailure"`
}

// listTemplates is GET /api/templates[?namespace=].
func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, &s.caches.templates) {
		return
	}
	var templates []*v1alpha1.PipelineTemplate
	var err error
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		templates, err = s.caches.templateLister.PipelineTemplates(ns).List(labels.Everything())
	} else {
		templates, err = s.caches.templateLister.List(labels.Everything())
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "list templates from the cache: "+err.Error())
		return
	}
	slices.SortFunc(templates, func(a, b *v1alpha1.PipelineTemplate) int { return compareKeys(a, b) })
	items := make([]templateSummary, 0, len(templates))
	for _, t := range templates {
		sum := templateSummary{
			Namespace: t.Namespace, Name: t.Name, CreationTimestamp: t.CreationTimestamp,
			Params:    make([]templateParam, 0, len(t.Spec.Params)),
			Steps:     make([]templateStep, 0, len(t.Spec.Steps)),
			OnFailure: string(t.Spec.OnFailure),
		}
		for _, p := range t.Spec.Params {
			sum.Params = append(sum.Params, templateParam{Name: p.Name, Required: p.Required, Default: p.Default, Description: p.Description})
		}
		for _, st := range t.Spec.Steps {
			sum.Steps = append(sum.Steps, templateStep{Name: st.Name, Executor: st.Executor})
		}
		items = append(items, sum)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

type triggerResource struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type conditionSummary struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type triggerSummary struct {
	Namespace         string          `json:"namespace"`
	Name              string          `json:"name"`
	CreationTimestamp metav1.Time     `json:"creationTimestamp"`
	Resource          triggerResource `json:"resource"`
	Template          string          `json:"template"`
	Concurrency       int32           `json:"concurrency"`
	Matched           int32           `json:"matched"`
	Running           int32           `json:"running"`
	Waiting           int32           `json:"waiting"`
	Succeeded         int32           `json:"succeeded"`
	Failed            int32           `json:"failed"`
	Queue             []string        `json:"queue"`
	// Ready is the Ready condition; status Unknown before the operator has written one.
	Ready      conditionSummary `json:"ready"`
	Suspend    bool             `json:"suspend"`
	NextWindow *metav1.Time     `json:"nextWindow"`
	// Paused is the pause the trigger honours (who, why, since); nil when not paused.
	Paused *v1alpha1.TriggerPauseRecord `json:"paused"`
	// PauseAsked: spec.pause is set (the trigger may not have seen it yet).
	PauseAsked bool `json:"pauseAsked"`
	// FailureBudget and FailureBudgetLeft: how many of its pipelines may fail before it
	// stops starting new ones, and how many more may.
	FailureBudget     int32 `json:"failureBudget"`
	FailureBudgetLeft int32 `json:"failureBudgetLeft"`
}

// listTriggers is GET /api/triggers[?namespace=].
func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, &s.caches.triggers) {
		return
	}
	var triggers []*v1alpha1.PipelineTrigger
	var err error
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		triggers, err = s.caches.triggerLister.PipelineTriggers(ns).List(labels.Everything())
	} else {
		triggers, err = s.caches.triggerLister.List(labels.Everything())
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "list triggers from the cache: "+err.Error())
		return
	}
	slices.SortFunc(triggers, func(a, b *v1alpha1.PipelineTrigger) int { return compareKeys(a, b) })
	items := make([]triggerSummary, 0, len(triggers))
	for _, t := range triggers {
		sum := triggerSummary{
			Namespace: t.Namespace, Name: t.Name, CreationTimestamp: t.CreationTimestamp,
			Resource:    triggerResource{APIVersion: t.Spec.Resource.APIVersion, Kind: t.Spec.Resource.Kind},
			Template:    t.Spec.TemplateRef.Name,
			Concurrency: max(t.Spec.Concurrency, 1), // the API's default
			Matched:     t.Status.Matched, Running: t.Status.Running, Waiting: t.Status.Waiting,
			Succeeded: t.Status.Succeeded, Failed: t.Status.Failed,
			Queue:      append([]string{}, t.Status.Queue...),
			Ready:      conditionSummary{Status: string(metav1.ConditionUnknown)},
			Suspend:    t.Spec.Suspend,
			NextWindow: t.Status.NextWindow,
			Paused:     t.Status.Paused, PauseAsked: t.Spec.Pause != nil,
			FailureBudget: rules.FailureBudget(t), FailureBudgetLeft: t.Status.FailureBudgetLeft,
		}
		if ready := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			sum.Ready = conditionSummary{Status: string(ready.Status), Reason: ready.Reason, Message: ready.Message}
		}
		items = append(items, sum)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

type executorSummary struct {
	Name           string               `json:"name"`
	Version        string               `json:"version"`
	Plugin         string               `json:"plugin"`
	Description    string               `json:"description"`
	Parameters     []contract.Parameter `json:"parameters"`
	UpdatesInPlace bool                 `json:"updatesInPlace"`
}

// listExecutors is GET /api/executors: the operator's catalogue, one small ConfigMap read
// with a GET per call (no informer on the operator's namespace, which the user may not
// be allowed to watch).
func (s *Server) listExecutors(w http.ResponseWriter, r *http.Request) {
	cat, err := catalog.Read(r.Context(), s.cfg.Kube, s.cfg.OperatorNamespace, s.cfg.CatalogName)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	items := make([]executorSummary, 0, len(cat.Executors))
	for _, e := range cat.Executors {
		items = append(items, executorSummary{
			Name: e.Name, Version: e.Version, Plugin: e.Plugin, Description: e.Description.Description,
			Parameters:     append([]contract.Parameter{}, e.Parameters...),
			UpdatesInPlace: e.UpdatesInPlace,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "operatorVersion": cat.OperatorVersion})
}

// getTrigger is GET /api/triggers/{namespace}/{name}: the trigger and its Events.
func (s *Server) getTrigger(w http.ResponseWriter, r *http.Request) {
	if !s.cached(w, r, &s.caches.triggers) {
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	t, err := s.caches.triggerLister.PipelineTriggers(ns).Get(name)
	if err != nil {
		writeCacheError(w, "trigger", ns, name, err)
		return
	}
	t = t.DeepCopy()
	t.APIVersion, t.Kind = v1alpha1.SchemeGroupVersion.String(), kindTrigger
	out := objectDetail{Trigger: t}
	out.Events, out.EventsError = s.eventsOf(&s.caches.triggerEvents, kindTrigger, ns, name, string(t.UID))
	writeJSON(w, http.StatusOK, out)
}
