package dashboard

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// historyPage is how many records the history page asks for at a time.
const historyPage = 100

// historySummary is one record of the archive, as the history page lists it.
type historySummary struct {
	Namespace  string                 `json:"namespace"`
	Name       string                 `json:"name"`
	Pipeline   string                 `json:"pipeline"`
	UID        string                 `json:"uid"`
	Generation int64                  `json:"generation"`
	State      v1alpha1.ArchiveState  `json:"state"`
	Phase      v1alpha1.PipelinePhase `json:"phase"`
	Trigger    string                 `json:"trigger,omitempty"`
	Object     string                 `json:"object,omitempty"`
	Creator    string                 `json:"creator,omitempty"`
	Finished   metav1.Time            `json:"finished"`
	Steps      int                    `json:"steps"`
	Succeeded  int                    `json:"succeeded"`
	// FailedStep is the step that failed, if one did.
	FailedStep string `json:"failedStep,omitempty"`
}

type historyList struct {
	Items    []historySummary `json:"items"`
	Continue string           `json:"continue,omitempty"`
}

// listHistory lists a page of the archive's records (of ?namespace, else of the
// dashboard's namespace, else every namespace the user may read), from the history API as the dashboard's user: the API server's
// RBAC decides what they see, as for kubectl get pipelinerecords. ?continue is the next
// page's token.
func (s *Server) listHistory(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns := q.Get("namespace")
	if ns == "" {
		ns = s.cfg.Namespace // the dashboard's namespace; empty: every namespace
	}
	list, err := s.cfg.Stepwise.HistoryV1alpha1().PipelineRecords(ns).List(r.Context(),
		metav1.ListOptions{Limit: historyPage, Continue: q.Get("continue")})
	if apierrors.IsNotFound(err) {
		writeError(w, http.StatusNotFound, "the history API is not installed: the operator serves it with --archive-dsn-file and --history-secure-port (docs/history.md)")
		return
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	out := historyList{Items: make([]historySummary, 0, len(list.Items)), Continue: list.Continue}
	for i := range list.Items {
		out.Items = append(out.Items, summarizeRecord(&list.Items[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func summarizeRecord(r *historyv1alpha1.PipelineRecord) historySummary {
	p := v1alpha1.Pipeline{Spec: r.Spec, Status: r.Status}
	sum := historySummary{
		Namespace: r.Namespace, Name: r.Name, Pipeline: r.Pipeline.Name, UID: r.Pipeline.UID, Generation: r.Pipeline.Generation,
		State: r.State, Phase: r.Phase, Trigger: r.Trigger, Object: r.Object, Creator: r.Creator, Finished: r.Finished,
		Steps: max(len(p.StepsRun()), len(r.Status.Steps)),
	}
	for _, st := range r.Status.Steps {
		switch st.Phase {
		case v1alpha1.StepSucceeded:
			sum.Succeeded++
		case v1alpha1.StepFailed:
			sum.FailedStep = st.Name
		}
	}
	return sum
}
