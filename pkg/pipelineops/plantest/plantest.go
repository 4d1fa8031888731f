// Package plantest plays the operator's part in dry runs, for the tests of code that plans
// pipelines (pipelineops.Planner and its callers) against a fake clientset.
package plantest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/fake"
)

// answerWithin bounds how long an answer waits for the code under test to watch: a test
// that never watches leaves no goroutine behind.
const answerWithin = 10 * time.Second

// Operator plays the operator for dry runs: it names each pipeline created (the fake
// clientset does not honour generateName: NAME-00000, NAME-00001...) and, once the code
// under test watches, gives it the status its answer sets, through the watch. A nil answer
// never answers.
type Operator struct {
	sw *fake.Clientset
	// gvr is the resource of Pipelines, as the tracker names it.
	gvr      schema.GroupVersionResource
	answer   func(p *v1alpha1.Pipeline)
	watching chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	created []*v1alpha1.Pipeline
}

// NewOperator starts answering the pipelines created through sw; the test waits for its
// answers at its end.
func NewOperator(t testing.TB, sw *fake.Clientset, answer func(p *v1alpha1.Pipeline)) *Operator {
	t.Helper()
	op := &Operator{sw: sw, gvr: v1alpha1.SchemeGroupVersion.WithResource("pipelines"), answer: answer, watching: make(chan struct{})}
	sw.PrependWatchReactor("pipelines", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := sw.Tracker().Watch(op.gvr, action.GetNamespace())
		op.once.Do(func() { close(op.watching) })
		return true, w, err
	})
	sw.PrependReactor("create", "pipelines", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.CreateAction).GetObject().(*v1alpha1.Pipeline).DeepCopy()
		op.mu.Lock()
		if p.Name == "" {
			p.Name = fmt.Sprintf("%s%05d", p.GenerateName, len(op.created))
		}
		op.created = append(op.created, p.DeepCopy())
		op.mu.Unlock()
		if err := sw.Tracker().Create(op.gvr, p, p.Namespace); err != nil {
			return true, nil, err
		}
		if answer != nil {
			op.wg.Add(1)
			go op.plan(p.DeepCopy())
		}
		return true, p, nil
	})
	t.Cleanup(op.wg.Wait)
	return op
}

// plan answers once the code under test watches, so that the answer comes through the
// watch.
func (op *Operator) plan(p *v1alpha1.Pipeline) {
	defer op.wg.Done()
	select {
	case <-op.watching:
	case <-time.After(answerWithin):
		return
	}
	op.answer(p)
	_ = op.sw.Tracker().Update(op.gvr, p, p.Namespace)
}

// Created are the pipelines created so far, as they were created.
func (op *Operator) Created() []*v1alpha1.Pipeline {
	op.mu.Lock()
	defer op.mu.Unlock()
	return slices.Clone(op.created)
}
