package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	listers "github.com/stepwise-dev/stepwise/pkg/generated/listers/stepwise/v1alpha1"
)

// StateSource is what the state metrics read at each scrape: the leader's caches, as
// kube-state-metrics reads its informers. Nothing is counted as events happen, so the
// figures cannot drift from the objects.
type StateSource struct {
	Pipelines listers.PipelineLister
	Triggers  listers.PipelineTriggerLister
	// KnownExecutor tells whether an executor is offered (built in or a plugin): only
	// those name a series, so a tenant cannot make one per name it makes up.
	KnownExecutor func(name string) bool
	Now           func() time.Time
}

// BlockerKindLabel is the kind label of a blocker: its kind when it is one Stepwise
// writes, else Other (a kind an executor names), so that the series stay few.
func BlockerKindLabel(kind string) string {
	if v1alpha1.KnownBlockerKind(kind) {
		return kind
	}
	return "Other"
}

type stateCollector struct {
	src                                                  StateSource
	pipelines, steps, blocked, blockedSeconds            *prometheus.Desc
	triggerObjects, triggerBudgetLeft, triggerBlockedFor *prometheus.Desc
}

// NewState registers the state metrics (pipelines, steps, what holds them back, triggers)
// with reg, read from src at each scrape.
func NewState(reg prometheus.Registerer, src StateSource) {
	reg.MustRegister(&stateCollector{
		src:               src,
		pipelines:         definition(PipelinesName).desc(),
		steps:             definition(StepsName).desc(),
		blocked:           definition(PipelinesBlockedName).desc(),
		blockedSeconds:    definition(BlockedSecondsName).desc(),
		triggerObjects:    definition(TriggerObjectsName).desc(),
		triggerBudgetLeft: definition(TriggerBudgetLeftName).desc(),
		triggerBlockedFor: definition(TriggerBlockedName).desc(),
	})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pipelines, c.steps, c.blocked, c.blockedSeconds, c.triggerObjects, c.triggerBudgetLeft, c.triggerBlockedFor} {
		ch <- d
	}
}

type nsKey struct{ namespace, value string }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.src.Now()
	if pipelines, err := c.src.Pipelines.List(labels.Everything()); err == nil {
		c.collectPipelines(ch, pipelines, now)
	}
	if triggers, err := c.src.Triggers.List(labels.Everything()); err == nil {
		c.collectTriggers(ch, triggers, now)
	}
}

func (c *stateCollector) collectPipelines(ch chan<- prometheus.Metric, pipelines []*v1alpha1.Pipeline, now time.Time) {
	phases := map[nsKey]int{}
	steps := map[[2]string]int{}
	blocked := map[nsKey]int{}
	longest := map[nsKey]float64{}
	for _, p := range pipelines {
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(v1alpha1.PipelinePending)
		}
		phases[nsKey{p.Namespace, phase}]++
		for _, s := range p.Status.Steps {
			executor := s.Executor
			if !c.src.KnownExecutor(executor) {
				executor = "unknown"
			}
			phase := string(s.Phase)
			if phase == "" {
				phase = string(v1alpha1.StepPending)
			}
			steps[[2]string{executor, phase}]++
		}
		seen := map[string]bool{}
		for _, b := range p.Status.BlockedBy {
			key := nsKey{p.Namespace, BlockerKindLabel(b.Kind)}
			if !seen[key.value] {
				seen[key.value] = true
				blocked[key]++
			}
			if b.Since != nil {
				longest[key] = max(longest[key], now.Sub(b.Since.Time).Seconds())
			}
		}
	}
	for k, n := range phases {
		ch <- prometheus.MustNewConstMetric(c.pipelines, prometheus.GaugeValue, float64(n), k.namespace, k.value)
	}
	for k, n := range steps {
		ch <- prometheus.MustNewConstMetric(c.steps, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	for k, n := range blocked {
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(n), k.namespace, k.value)
		ch <- prometheus.MustNewConstMetric(c.blockedSeconds, prometheus.GaugeValue, longest[k], k.namespace, k.value)
	}
}

func (c *stateCollector) collectTriggers(ch chan<- prometheus.Metric, triggers []*v1alpha1.PipelineTrigger, now time.Time) {
	for _, t := range triggers {
		s := t.Status
		for state, n := range map[string]int32{
			"matched": s.Matched, "running": s.Running, "waiting": s.Waiting,
			"awaiting_approval": s.AwaitingApproval, "succeeded": s.Succeeded, "failed": s.Failed,
		} {
			ch <- prometheus.MustNewConstMetric(c.triggerObjects, prometheus.GaugeValue, float64(n), t.Namespace, t.Name, state)
		}
		ch <- prometheus.MustNewConstMetric(c.triggerBudgetLeft, prometheus.GaugeValue, float64(s.FailureBudgetLeft), t.Namespace, t.Name)
		longest := map[string]float64{}
		for _, b := range s.BlockedBy {
			kind := BlockerKindLabel(b.Kind)
			seconds := 0.0
			if b.Since != nil {
				seconds = now.Sub(b.Since.Time).Seconds()
			}
			longest[kind] = max(longest[kind], seconds)
		}
		for kind, seconds := range longest {
			ch <- prometheus.MustNewConstMetric(c.triggerBlockedFor, prometheus.GaugeValue, seconds, t.Namespace, t.Name, kind)
		}
	}
}
