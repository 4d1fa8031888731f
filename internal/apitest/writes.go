package apitest

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// Versions gives out resourceVersions that grow with each write, as an API server's: the
// fake clientsets give none, and the controllers compare them as integers to tell their
// last write from an older copy an informer still holds.
type Versions struct {
	mu   sync.Mutex
	last int
}

// Next is the next resourceVersion.
func (v *Versions) Next() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last++
	return strconv.Itoa(v.last)
}

// PipelineWrites is a reactor for a fake clientset's pipelines (PrependReactor("*",
// "pipelines", ...)): it carries out a create, update or patch on tracker and gives the
// pipeline the next resourceVersion of versions, as an API server would, and a created
// one a UID, generation 1 and its creation time (now).
func PipelineWrites(tracker k8stesting.ObjectTracker, versions *Versions, now func() time.Time) k8stesting.ReactionFunc {
	resource := v1alpha1.SchemeGroupVersion.WithResource("pipelines")
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		switch action.GetVerb() {
		case "create", "update", "patch":
		default:
			return false, nil, nil
		}
		if create, ok := action.(k8stesting.CreateActionImpl); ok {
			// The fake's field tracking knows no schema of ours and refuses a create: add
			// the object as the fake adds its initial ones.
			p := create.GetObject().(*v1alpha1.Pipeline).DeepCopy()
			if _, err := tracker.Get(action.GetResource(), p.Namespace, p.Name); err == nil {
				return true, nil, apierrors.NewAlreadyExists(action.GetResource().GroupResource(), p.Name)
			}
			p.ResourceVersion = versions.Next()
			p.UID = types.UID("uid-" + p.Name)
			p.Generation = 1
			p.CreationTimestamp = metav1.NewTime(now())
			return true, p, tracker.Add(p)
		}
		_, obj, err := k8stesting.ObjectReaction(tracker)(action)
		if err != nil {
			return true, obj, err
		}
		p, ok := obj.(*v1alpha1.Pipeline)
		if !ok {
			return true, obj, nil
		}
		p = p.DeepCopy()
		p.ResourceVersion = versions.Next()
		if p.UID == "" {
			p.UID = types.UID("uid-" + p.Name)
		}
		if p.CreationTimestamp.IsZero() {
			p.CreationTimestamp = metav1.NewTime(now())
		}
		return true, p, tracker.Update(resource, p, p.Namespace)
	}
}

// Events drains the Events recorder holds, as "Type Reason Message".
func Events(recorder *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// EventReasons drains the Events recorder holds, as "Type Reason".
func EventReasons(recorder *record.FakeRecorder) []string {
	var out []string
	for _, e := range Events(recorder) {
		var typ, reason string
		_, _ = fmt.Sscanf(e, "%s %s", &typ, &reason)
		out = append(out, typ+" "+reason)
	}
	return out
}
