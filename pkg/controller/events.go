package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// event is an Event a sync records once its status is written.
type event struct {
	// eventType is corev1.EventTypeNormal or corev1.EventTypeWarning.
	eventType       string
	reason, message string
}

// normalEvent and warningEvent queue an Event on the pipeline for after the status write.
func (ps *pipelineSync) normalEvent(reason, format string, args ...any) {
	ps.events = append(ps.events, event{eventType: corev1.EventTypeNormal, reason: reason, message: fmt.Sprintf(format, args...)})
}

func (ps *pipelineSync) warningEvent(reason, format string, args ...any) {
	ps.events = append(ps.events, event{eventType: corev1.EventTypeWarning, reason: reason, message: fmt.Sprintf(format, args...)})
}

// emitEvents records the queued Events (an emptied StepStarted has no reason: its step
// succeeded in the same sync).
func (ps *pipelineSync) emitEvents() {
	if ps.c.recorder != nil {
		for _, e := range ps.events {
			if e.reason != "" {
				ps.c.recorder.Eventf(ps.p, e.eventType, e.reason, "%s", e.message)
			}
		}
	}
	ps.events, ps.started = nil, nil
	ps.exportSpans()
}
