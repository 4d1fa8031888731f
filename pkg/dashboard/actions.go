package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

// The actions. Each is one request to the API server with the user's credentials, through
// pipelineops as `kubectl stepwise` does: RBAC and the API server's audit log see the
// user, not the dashboard.

// maxActionBody bounds an action's JSON body ({"step": "..."}, and an approval's comment).
const maxActionBody = 4 << 10

type actionResult struct {
	Message string `json:"message"`
}

// retryPipeline is POST /api/pipelines/{namespace}/{name}/retry, with an optional body
// {"step": "NAME"} to retry from that step rather than the failed one.
func (s *Server) retryPipeline(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	var body struct {
		Step string `json:"step"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := pipelineops.Retry(r.Context(), s.cfg.Stepwise, ns, name, body.Step); err != nil {
		writeActionError(w, err)
		return
	}
	msg := fmt.Sprintf("retry of pipeline %s/%s requested", ns, name)
	if body.Step != "" {
		msg = fmt.Sprintf("retry of pipeline %s/%s from step %s requested", ns, name, body.Step)
	}
	s.logger.Info("Pipeline retry requested", "pipeline", ns+"/"+name, "step", body.Step)
	writeJSON(w, http.StatusOK, actionResult{Message: msg})
}

// suspendPipeline is POST .../suspend (suspend true) and .../resume (false).
func (s *Server) suspendPipeline(suspend bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if !s.inScope(w, ns) {
			return
		}
		if _, err := pipelineops.SetSuspend(r.Context(), s.cfg.Stepwise, ns, name, suspend); err != nil {
			writeActionError(w, err)
			return
		}
		verb := "resumed"
		if suspend {
			verb = "suspended"
		}
		s.logger.Info("Pipeline "+verb, "pipeline", ns+"/"+name)
		writeJSON(w, http.StatusOK, actionResult{Message: fmt.Sprintf("pipeline %s/%s %s", ns, name, verb)})
	}
}

// pauseTrigger is POST /api/triggers/{namespace}/{name}/pause, body {"reason": "..."}: the
// trigger is paused in the user's name (their credentials say who), as
// `kubectl stepwise triggers pause` does.
func (s *Server) pauseTrigger(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	t, err := pipelineops.PauseTrigger(r.Context(), s.cfg.Kube, s.cfg.Stepwise, ns, name, body.Reason)
	if err != nil {
		writeActionError(w, err)
		return
	}
	s.logger.Info("Trigger paused", "trigger", ns+"/"+name, "by", t.Spec.Pause.By)
	writeJSON(w, http.StatusOK, actionResult{Message: fmt.Sprintf("trigger %s/%s paused by %s", ns, name, t.Spec.Pause.By)})
}

// resumeTrigger is POST /api/triggers/{namespace}/{name}/resume: the pause is lifted and
// the failures count from zero, in the user's name.
func (s *Server) resumeTrigger(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	t, err := pipelineops.ResumeTrigger(r.Context(), s.cfg.Kube, s.cfg.Stepwise, ns, name, time.Now())
	if err != nil {
		writeActionError(w, err)
		return
	}
	s.logger.Info("Trigger resumed", "trigger", ns+"/"+name, "by", t.Spec.Resume.By)
	writeJSON(w, http.StatusOK, actionResult{Message: fmt.Sprintf("trigger %s/%s resumed by %s", ns, name, t.Spec.Resume.By)})
}

// decideStep is POST /api/pipelines/{namespace}/{name}/approve (decision Approve) and
// .../reject (Reject), body {"step": "NAME", "comment": "..."}: an Approval of the step
// that waits, in the user's name (their credentials say who, and the install's admission
// policy checks it and that they have the verb approve on the pipeline), as
// `kubectl stepwise approve` and `reject` do. An empty step is the one step that waits.
// A rejection needs a comment: it is the step's failure message. The operator counts the
// decision, or records why it does not; the pipeline's status shows which.
func (s *Server) decideStep(decision v1alpha1.ApprovalDecision) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		if !s.inScope(w, ns) {
			return
		}
		var body struct {
			Step    string `json:"step"`
			Comment string `json:"comment"`
		}
		if err := decodeBody(w, r, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		comment := strings.TrimSpace(body.Comment)
		if err := pipelineops.CheckComment(decision, comment); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		a, err := pipelineops.Decide(r.Context(), s.cfg.Kube, s.cfg.Stepwise, ns, name, body.Step, decision, comment)
		if err != nil {
			writeActionError(w, err)
			return
		}
		noun, verb := "approval", "approved"
		if decision == v1alpha1.ApprovalReject {
			noun, verb = "rejection", "rejected"
		}
		s.logger.Info("Step "+verb, "pipeline", ns+"/"+name, "step", a.Spec.Step,
			"by", a.Spec.User, "approval", a.Name)
		writeJSON(w, http.StatusOK, actionResult{Message: fmt.Sprintf("%s of step %s of pipeline %s/%s by %s recorded",
			noun, a.Spec.Step, ns, name, a.Spec.User)})
	}
}

// deletePipeline is DELETE /api/pipelines/{namespace}/{name}: a plain delete; the
// operator runs the teardown before the pipeline goes.
func (s *Server) deletePipeline(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.inScope(w, ns) {
		return
	}
	if err := s.cfg.Stepwise.StepwiseV1alpha1().Pipelines(ns).Delete(r.Context(), name, metav1.DeleteOptions{}); err != nil {
		writeActionError(w, fmt.Errorf("delete pipeline %s/%s: %w", ns, name, err))
		return
	}
	s.logger.Info("Pipeline deleted", "pipeline", ns+"/"+name)
	writeJSON(w, http.StatusOK, actionResult{
		Message: fmt.Sprintf("pipeline %s/%s deleted; its teardown runs before it goes", ns, name),
	})
}

// writeActionError answers an API server's error with its status; any other error is
// pipelineops refusing what the pipeline's state does not allow (a retry of a pipeline
// that has not failed): 409 Conflict.
func writeActionError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		writeAPIError(w, err)
		return
	}
	writeError(w, http.StatusConflict, err.Error())
}

// decodeBody reads an optional small JSON body into v; an empty body leaves v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the request body: %w", err)
	}
	return nil
}
