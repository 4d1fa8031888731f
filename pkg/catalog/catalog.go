// Package catalog publishes the executors a running operator offers, built in and served
// by plugins, as a ConfigMap in the operator's namespace, so that users can list them
// (kubectl stepwise executors) with nothing more than read access to that ConfigMap: no
// port-forward, no access to the operator's pod.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

const (
	// DefaultName is the name of the catalogue ConfigMap.
	DefaultName = "stepwise-executors"
	// DefaultNamespace is the operator's namespace when nothing says otherwise.
	DefaultNamespace = "stepwise-system"
	// DataKey is the ConfigMap key holding the catalogue as JSON.
	DataKey = "executors.json"
)

// Catalog is what the operator offers.
type Catalog struct {
	// OperatorVersion is the version of the operator binary that published the catalogue.
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// Executors are sorted by name.
	Executors []Entry `json:"executors"`
	// RefusedPlugins are the plugins the operator refused to start, and why, sorted by
	// name: the steps of their executors wait on them.
	RefusedPlugins []executor.Refusal `json:"refusedPlugins,omitempty"`
}

// Entry is one executor.
type Entry struct {
	Name string `json:"name"`
	contract.Description
}

// Lister is what Build needs of the executor registry; *executor.Registry is one.
type Lister interface {
	Names() []string
	Get(name string) (executor.TaskExecutor, bool)
	Refusals() []executor.Refusal
}

// Build describes every executor of the registry. Built-ins (no plugin) get the
// operator's version when they do not name one.
func Build(reg Lister, operatorVersion string) Catalog {
	c := Catalog{OperatorVersion: operatorVersion, Executors: []Entry{}}
	for _, name := range reg.Names() { // sorted
		e, ok := reg.Get(name)
		if !ok {
			continue
		}
		d := executor.Describe(e)
		if d.Version == "" && d.Plugin == "" {
			d.Version = operatorVersion
		}
		c.Executors = append(c.Executors, Entry{Name: name, Description: d})
	}
	if refused := reg.Refusals(); len(refused) > 0 {
		c.RefusedPlugins = refused
	}
	return c
}

// Publisher writes the catalogue ConfigMap, and an Event on it for each refused plugin.
type Publisher struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	namespace string
	name      string
	// backoff spaces the attempts of Run.
	backoff wait.Backoff
}

// NewPublisher returns a Publisher of the ConfigMap namespace/name; recorder may be nil
// (no Events).
func NewPublisher(client kubernetes.Interface, recorder record.EventRecorder, namespace, name string) *Publisher {
	return &Publisher{
		client: client, recorder: recorder, namespace: namespace, name: name,
		backoff: wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 5 * time.Minute},
	}
}

// Publish writes the catalogue when the ConfigMap does not hold it already, and reports
// whether it wrote. Every replica publishes at start; replicas of one version write the
// same bytes, so only the first writes at all.
func (p *Publisher) Publish(ctx context.Context, c Catalog) (bool, error) {
	_, changed, err := p.publish(ctx, c)
	return changed, err
}

// publish is Publish, returning the ConfigMap as written or found.
func (p *Publisher) publish(ctx context.Context, c Catalog) (*corev1.ConfigMap, bool, error) {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, false, fmt.Errorf("encode executor catalogue: %w", err)
	}
	want := string(data)
	cms := p.client.CoreV1().ConfigMaps(p.namespace)
	cm, err := cms.Get(ctx, p.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: labels()},
			Data:       map[string]string{DataKey: want},
		}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return nil, false, fmt.Errorf("create executor catalogue ConfigMap %s/%s: %w", p.namespace, p.name, err)
		}
		return created, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("get executor catalogue ConfigMap %s/%s: %w", p.namespace, p.name, err)
	}
	if cm.Data[DataKey] == want {
		return cm, false, nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[DataKey] = want
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range labels() {
		cm.Labels[k] = v
	}
	// The update carries the resourceVersion read above: a replica that wrote in between
	// makes it fail with a conflict, and Run tries again on fresh data.
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, false, fmt.Errorf("update executor catalogue ConfigMap %s/%s: %w", p.namespace, p.name, err)
	}
	return updated, true, nil
}

// Run publishes the catalogue, retrying with backoff until it succeeds or ctx ends. A
// catalogue that cannot be written (the namespace or the RBAC not there yet) never stops
// the operator from running pipelines: it only logs.
func (p *Publisher) Run(ctx context.Context, c Catalog) {
	logger := klog.FromContext(ctx).WithValues("configMap", klog.KRef(p.namespace, p.name))
	backoff := p.backoff
	for {
		cm, changed, err := p.publish(ctx, c)
		if err == nil {
			logger.Info("Executor catalogue published", "executors", len(c.Executors), "refusedPlugins", len(c.RefusedPlugins), "changed", changed)
			p.recordRefusals(cm, c.RefusedPlugins)
			return
		}
		delay := backoff.Step()
		logger.Error(err, "Could not publish the executor catalogue; trying again", "after", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// recordRefusals records a Warning Event on the catalogue for each plugin this replica
// refused: kubectl get events in the operator's namespace shows them next to its start.
func (p *Publisher) recordRefusals(cm *corev1.ConfigMap, refused []executor.Refusal) {
	if p.recorder == nil {
		return
	}
	for _, r := range refused {
		p.recorder.Eventf(cm, corev1.EventTypeWarning, v1alpha1.ReasonPluginRefused,
			"plugin %s refused (%s): %s", r.Plugin, r.Reason, contract.Truncate(r.Message, maxEventMessage))
	}
}

// maxEventMessage bounds the refusal's message in an Event, under the API's 1 KiB note.
const maxEventMessage = 900

// Read returns the catalogue published in the ConfigMap namespace/name.
func Read(ctx context.Context, client kubernetes.Interface, namespace, name string) (Catalog, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Catalog{}, fmt.Errorf("get executor catalogue ConfigMap %s/%s: %w", namespace, name, err)
	}
	data, ok := cm.Data[DataKey]
	if !ok {
		return Catalog{}, fmt.Errorf("ConfigMap %s/%s has no key %s", namespace, name, DataKey)
	}
	var c Catalog
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return Catalog{}, fmt.Errorf("decode executor catalogue in ConfigMap %s/%s: %w", namespace, name, err)
	}
	return c, nil
}

const fieldManager = "stepwise-operator"

func labels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "stepwise",
		"app.kubernetes.io/component":  "executor-catalog",
		"app.kubernetes.io/managed-by": "stepwise-operator",
	}
}
