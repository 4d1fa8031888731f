package dashboard

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// pipelineQuery is what GET /api/pipelines asks for.
type pipelineQuery struct {
	namespace string
	// phases, when not empty, are the phases wanted (phase=Failed,Running).
	phases            map[string]bool
	template, trigger string
	// text is q, lowercased: a substring of the name, namespace, template, trigger or
	// current step.
	text          string
	sort          string
	offset, limit int
}

// parsePipelineQuery reads the query of GET /api/pipelines. A limit above maxLimit is
// cut to it.
func parsePipelineQuery(v url.Values) (pipelineQuery, error) {
	q := pipelineQuery{
		namespace: v.Get("namespace"),
		template:  v.Get("template"),
		trigger:   v.Get("trigger"),
		text:      strings.ToLower(strings.TrimSpace(v.Get("q"))),
		sort:      v.Get("sort"),
		limit:     defaultLimit,
	}
	if phase := v.Get("phase"); phase != "" {
		q.phases = map[string]bool{}
		for p := range strings.SplitSeq(phase, ",") {
			q.phases[strings.TrimSpace(p)] = true
		}
	}
	switch q.sort {
	case "":
		q.sort = "name"
	case "name", "-name", "age", "-age", "phase", "-phase":
	default:
		return q, fmt.Errorf("unknown sort %q: name, -name, age, -age, phase or -phase", q.sort)
	}
	var err error
	if q.offset, err = nonNegative(v, "offset", 0); err != nil {
		return q, err
	}
	if q.limit, err = nonNegative(v, "limit", defaultLimit); err != nil {
		return q, err
	}
	q.limit = min(q.limit, maxLimit)
	return q, nil
}

func nonNegative(v url.Values, key string, def int) (int, error) {
	s := v.Get(key)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s must be a whole number of at least 0, not %q", key, s)
	}
	return n, nil
}

// matches tells whether p, whose phase is phase, passes every filter but the namespace
// (the lister applies it).
func (q *pipelineQuery) matches(p *v1alpha1.Pipeline, phase string) bool {
	if len(q.phases) > 0 && !q.phases[phase] {
		return false
	}
	if q.template != "" && templateOf(p) != q.template {
		return false
	}
	if q.trigger != "" && p.Labels[v1alpha1.LabelTrigger] != q.trigger {
		return false
	}
	if q.text == "" {
		return true
	}
	for _, field := range [...]string{p.Name, p.Namespace, templateOf(p), p.Labels[v1alpha1.LabelTrigger], p.Status.CurrentStep} {
		if containsFold(field, q.text) {
			return true
		}
	}
	return false
}

// containsFold tells whether s contains lowerSub, ignoring case. Kubernetes names are
// lowercase already: the common case allocates nothing.
func containsFold(s, lowerSub string) bool {
	if strings.Contains(s, lowerSub) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; ('A' <= c && c <= 'Z') || c >= 0x80 {
			return strings.Contains(strings.ToLower(s), lowerSub)
		}
	}
	return false
}

// sortPipelines sorts ps in place. Every order ends on name and namespace, unique, so
// that pages do not overlap or skip.
func sortPipelines(ps []*v1alpha1.Pipeline, by string) {
	var less func(a, b *v1alpha1.Pipeline) int
	switch strings.TrimPrefix(by, "-") {
	case "age": // youngest first, as an Age column sorted ascending
		less = func(a, b *v1alpha1.Pipeline) int {
			if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
				return c
			}
			return byName(a, b)
		}
	case "phase": // what needs attention first
		less = func(a, b *v1alpha1.Pipeline) int {
			if c := cmp.Compare(phaseRank(phaseOf(a)), phaseRank(phaseOf(b))); c != 0 {
				return c
			}
			return byName(a, b)
		}
	default:
		less = byName
	}
	if strings.HasPrefix(by, "-") {
		slices.SortFunc(ps, func(a, b *v1alpha1.Pipeline) int { return less(b, a) })
		return
	}
	slices.SortFunc(ps, less)
}

func byName(a, b *v1alpha1.Pipeline) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return strings.Compare(a.Namespace, b.Namespace)
}

// phaseRank orders sort=phase: what needs attention first, finished work last.
func phaseRank(phase string) int {
	switch v1alpha1.PipelinePhase(phase) {
	case v1alpha1.PipelineFailed:
		return 0
	case v1alpha1.PipelineRunning:
		return 1
	case v1alpha1.PipelineSuspended:
		return 2
	case v1alpha1.PipelinePending:
		return 3
	case v1alpha1.PipelineDeleting:
		return 4
	case v1alpha1.PipelinePlanned:
		return 5
	case v1alpha1.PipelineSucceeded:
		return 6
	}
	return 7
}

// phaseOf is the pipeline's phase; Pending before the operator has written any.
func phaseOf(p *v1alpha1.Pipeline) string {
	if p.Status.Phase == "" {
		return string(v1alpha1.PipelinePending)
	}
	return string(p.Status.Phase)
}

func templateOf(p *v1alpha1.Pipeline) string {
	if p.Spec.TemplateRef != nil {
		return p.Spec.TemplateRef.Name
	}
	return ""
}
