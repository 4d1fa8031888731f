package trigger

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/dynwatch"
)

// ResourcesFlag is the operator's flag that lists the kinds triggers may watch.
const ResourcesFlag = "--trigger-resources"

// DefaultResources is the default of ResourcesFlag: what deploy/ lets the operator list
// and watch.
const DefaultResources = "nodes,webapps.demo.stepwise.dev"

// mapperResetInterval bounds how often an unknown kind makes the RESTMapper read
// discovery again (a CRD installed after the operator started).
const mapperResetInterval = 30 * time.Second

// target is the kind a trigger watches, mapped.
type target struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// kind is the target as the watch manager watches it.
func (t target) kind() dynwatch.Kind { return dynwatch.Kind{GVR: t.gvr, Namespaced: t.namespaced} }

// problem is why a trigger cannot act: the reason and message of its Ready=False.
type problem struct {
	reason, message string
	// retry: the cause may go away without the trigger changing (a CRD not installed
	// yet), so the trigger is looked at again later.
	retry bool
}

// resourcePattern is a resource, optionally followed by its group: lower-case DNS names.
var resourcePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// ParseResources parses the value of ResourcesFlag: comma-separated "resource.group"
// entries (just "resource" for the core group), e.g. "nodes,webapps.demo.stepwise.dev".
// Duplicates are dropped; an empty value allows no kind.
func ParseResources(s string) ([]schema.GroupResource, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []schema.GroupResource
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return nil, fmt.Errorf("%s %q: empty entry", ResourcesFlag, s)
		}
		if !resourcePattern.MatchString(entry) {
			return nil, fmt.Errorf("%s: %q: not a resource.group such as nodes or webapps.demo.stepwise.dev", ResourcesFlag, entry)
		}
		gr := schema.ParseGroupResource(entry)
		if !slices.Contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out, nil
}

// resourceResolver maps a trigger's kind to the resource the operator watches, if its
// installer allowed it.
type resourceResolver struct {
	mapper  meta.RESTMapper
	allowed []schema.GroupResource
	clock   clock.PassiveClock

	mu        sync.Mutex
	lastReset time.Time
}

func newResourceResolver(mapper meta.RESTMapper, allowed []schema.GroupResource, clk clock.PassiveClock) *resourceResolver {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &resourceResolver{mapper: mapper, allowed: allowed, clock: clk}
}

// resolve maps res to a resource and its scope, and tells whether the operator may watch
// it. A kind the API server does not serve (yet) is retried: the mapper reads discovery
// again, at most every mapperResetInterval.
func (r *resourceResolver) resolve(res v1alpha1.TriggerResource) (target, *problem) {
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return target{}, &problem{reason: v1alpha1.TriggerReasonInvalidResource, message: fmt.Sprintf("apiVersion %q: %v", res.APIVersion, err)}
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: res.Kind}
	mapping, err := r.mapper.RESTMapping(gk, gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			r.resetMapper()
		}
		return target{}, &problem{reason: v1alpha1.TriggerReasonInvalidResource, retry: true,
			message: fmt.Sprintf("the API server serves no kind %s in %s", res.Kind, res.APIVersion)}
	}
	t := target{gvr: mapping.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	gr := t.gvr.GroupResource()
	if !slices.Contains(r.allowed, gr) {
		return target{}, &problem{reason: v1alpha1.TriggerReasonResourceNotAllowed, message: r.notAllowed(gr)}
	}
	return t, nil
}

// notAllowed says which flag the installer sets to allow gr.
func (r *resourceResolver) notAllowed(gr schema.GroupResource) string {
	now := "it watches no kind"
	if len(r.allowed) > 0 {
		names := make([]string, len(r.allowed))
		for i, a := range r.allowed {
			names[i] = a.String()
		}
		now = fmt.Sprintf("it watches only %s", strings.Join(names, ","))
	}
	return fmt.Sprintf("the operator does not watch %s (%s): its installer must add %q to %s and let it list and watch them",
		gr, now, gr.String(), ResourcesFlag)
}

// resetMapper makes a resettable mapper read discovery again, not too often.
func (r *resourceResolver) resetMapper() {
	resettable, ok := r.mapper.(meta.ResettableRESTMapper)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.clock.Now(); now.Sub(r.lastReset) >= mapperResetInterval {
		r.lastReset = now
		resettable.Reset()
	}
}
