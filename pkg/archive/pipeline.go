package archive

import (
	"encoding/json"
	"fmt"
	"time"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// RecordOf is the record of p in state, reached at finished: its identity, the columns
// that lists select on, and p itself as JSON without its managed fields (who wrote which
// field is the API server's bookkeeping, not the pipeline's history).
func RecordOf(p *v1alpha1.Pipeline, state v1alpha1.ArchiveState, finished time.Time) (Record, error) {
	body := p.DeepCopy()
	body.ManagedFields = nil
	if body.APIVersion == "" {
		body.APIVersion, body.Kind = v1alpha1.SchemeGroupVersion.String(), "Pipeline"
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return Record{}, fmt.Errorf("encode pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	return Record{
		UID:        string(p.UID),
		Generation: p.Generation,
		State:      state,
		Namespace:  p.Namespace,
		Name:       historyv1alpha1.RecordName(p.Name, string(p.UID), p.Generation, state),
		Pipeline:   p.Name,
		Phase:      string(p.Status.Phase),
		Trigger:    p.Labels[v1alpha1.LabelTrigger],
		Object:     p.Annotations[v1alpha1.AnnotationObject],
		Creator:    p.Annotations[v1alpha1.AnnotationCreatedBy],
		Labels:     p.Labels,
		Created:    p.CreationTimestamp.Time,
		Finished:   finished,
		Body:       raw,
	}, nil
}
