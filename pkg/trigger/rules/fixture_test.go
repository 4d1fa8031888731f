package rules

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/trigger/internal/triggertest"
)

// start and retiring are triggertest's, as are the objects of these tests (pkg/trigger's,
// cut to what a rule reads).
var (
	start    = triggertest.Start
	retiring = triggertest.Retiring
)

var (
	pipelinesGVR = v1alpha1.SchemeGroupVersion.WithResource("pipelines")
	webappsGVR   = schema.GroupVersionResource{Group: "demo.stepwise.dev", Version: "v1alpha1", Resource: "webapps"}
)

// existingPipeline is the unfinished pipeline of trigger "retire" for obj that the
// trigger would make (triggertest.ExistingPipeline).
func existingPipeline(obj *unstructured.Unstructured, uid string, created time.Time) *v1alpha1.Pipeline {
	name := PipelineName("retire", obj.GetName(), obj.GetUID())
	return triggertest.ExistingPipeline(name, ObjectKey(obj.GetNamespace(), obj.GetName()), obj, uid, created)
}
