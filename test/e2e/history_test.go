package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	historyv1alpha1 "github.com/stepwise-dev/stepwise/pkg/apis/history/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	clientset "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// historyClientAs is a client of the history API as user (no groups but the
// authenticated ones); "" is the admin.
func historyClientAs(t *testing.T, user string) clientset.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	c, err := clientset.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// records lists the records of pipeline name in ns (as the admin), once there are want.
func records(t *testing.T, ns, name string, want int) []historyv1alpha1.PipelineRecord {
	t.Helper()
	client := historyClientAs(t, "")
	list := framework.PollObject(t, time.Minute, func(ctx context.Context) (*historyv1alpha1.PipelineRecordList, error) {
		return notYet(client.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{
			FieldSelector: historyv1alpha1.FieldPipelineName + "=" + name,
		}))
	}, func(l *historyv1alpha1.PipelineRecordList) bool { return len(l.Items) >= want }, func(l *historyv1alpha1.PipelineRecordList) any {
		return l
	}, fmt.Sprintf("%d records of pipeline %s/%s (operator log: %s)", want, ns, name, operator.Log))
	return list.Items
}

// notYet makes the answers a list of records may give while it is not ready yet an empty
// list to poll again: 503 until the aggregation layer finds the history API available,
// and 403 for up to 10 s after a grant (the history API caches a denial that long, as
// delegated authorizers do).
func notYet(l *historyv1alpha1.PipelineRecordList, err error) (*historyv1alpha1.PipelineRecordList, error) {
	if apierrors.IsServiceUnavailable(err) || apierrors.IsForbidden(err) {
		return &historyv1alpha1.PipelineRecordList{}, nil
	}
	return l, err
}

func statesOf(items []historyv1alpha1.PipelineRecord) []v1alpha1.ArchiveState {
	var out []v1alpha1.ArchiveState
	for _, r := range items {
		out = append(out, r.State)
	}
	return out
}

func TestHistoryKeepsAPipelineAfterItIsDeletedBehindRBAC(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	p := recordPipeline(ns, "kept", "runner", recordStep("first", nil), recordStep("second", nil))
	p.Labels = map[string]string{"team": "blue"}
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	done := waitPipeline(t, ns, "kept", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Archived != nil })
	assert.Equal(t, v1alpha1.ArchiveSucceeded, done.Status.Archived.State, "the status says what the archive has")

	// Finished: one record, with the run's status, found by label and by field.
	items := records(t, ns, "kept", 1)
	require.Len(t, items, 1)
	r := items[0]
	assert.Equal(t, historyv1alpha1.RecordName("kept", string(done.UID), done.Generation, v1alpha1.ArchiveSucceeded), r.Name)
	assert.Equal(t, v1alpha1.PipelineSucceeded, r.Phase)
	assert.Equal(t, string(done.UID), r.Pipeline.UID)
	assert.Len(t, r.Status.Steps, 2)
	assert.Equal(t, "blue", r.Labels["team"])
	admin := historyClientAs(t, "")
	byLabel, err := admin.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{LabelSelector: "team=blue"})
	require.NoError(t, err)
	assert.Len(t, byLabel.Items, 1)
	none, err := admin.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{LabelSelector: "team=red"})
	require.NoError(t, err)
	assert.Empty(t, none.Items)

	// Deleted: torn down, then archived again, and gone from the API server.
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "kept", metav1.DeleteOptions{}))
	framework.PollObject(t, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "kept", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, func(gone bool) bool { return gone }, func(bool) any { return nil }, "pipeline kept deleted")
	items = records(t, ns, "kept", 2)
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveDeleted}, statesOf(items))
	deleted := items[1]
	assert.True(t, slices.ContainsFunc(deleted.Status.Steps, func(s v1alpha1.StepStatus) bool { return s.Phase == v1alpha1.StepDeleted }),
		"the record of the deletion holds the teardown: %+v", deleted.Status.Steps)
	// The Events reach the archive in batches, a second apart.
	framework.PollObject(t, time.Minute, func(ctx context.Context) (*historyv1alpha1.PipelineRecord, error) {
		return admin.HistoryV1alpha1().PipelineRecords(ns).Get(ctx, deleted.Name, metav1.GetOptions{})
	}, func(r *historyv1alpha1.PipelineRecord) bool {
		return slices.ContainsFunc(r.Events, func(e historyv1alpha1.RecordedEvent) bool { return e.Reason == "StepTornDown" })
	}, func(r *historyv1alpha1.PipelineRecord) any { return r.Events }, "the record's Events, the teardown's among them")

	// RBAC: a user who may not list the namespace's records gets 403; once allowed, the
	// records of that namespace only.
	serviceAccount(t, ns, "reader", false)
	reader := historyClientAs(t, "system:serviceaccount:"+ns+":reader")
	_, err = reader.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "the reader may not read the records yet: %v", err)
	cluster.Grant(t, ns, "reader", "history-reader", rbacv1.PolicyRule{
		APIGroups: []string{historyv1alpha1.SchemeGroupVersion.Group}, Resources: []string{"pipelinerecords"}, Verbs: []string{"get", "list"},
	})
	framework.PollObject(t, time.Minute, func(ctx context.Context) (*historyv1alpha1.PipelineRecordList, error) {
		return notYet(reader.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{}))
	}, func(l *historyv1alpha1.PipelineRecordList) bool { return len(l.Items) == 2 }, func(l *historyv1alpha1.PipelineRecordList) any {
		return l
	}, "the reader's list, once allowed")
	_, err = reader.HistoryV1alpha1().PipelineRecords("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another namespace's records stay hidden: %v", err)

	// Pages: one record at a time, then the next.
	page, err := admin.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.NotEmpty(t, page.Continue)
	next, err := admin.HistoryV1alpha1().PipelineRecords(ns).List(ctx, metav1.ListOptions{Limit: 1, Continue: page.Continue})
	require.NoError(t, err)
	require.Len(t, next.Items, 1)
	assert.NotEqual(t, page.Items[0].Name, next.Items[0].Name)
}

func TestRetentionRemovesAnArchivedPipelineWithoutATeardown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	p := recordPipeline(ns, "kept-a-while", "runner", recordStep("first", nil), recordStep("second", nil))
	p.Spec.Retention = &v1alpha1.Retention{AfterFinished: metav1.Duration{Duration: 2 * time.Second}}
	created, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)

	// Archived, kept for its retention, then removed: gone from the API server...
	framework.PollObject(t, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Get(ctx, "kept-a-while", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}, func(gone bool) bool { return gone }, func(bool) any { return nil }, "pipeline kept-a-while removed by retention (operator log: "+operator.Log+")")
	// ... with nothing torn down: test.record's record shows no teardown hook ...
	calls := recordedCalls(t, ns, "stepwise-record-kept-a-while")
	for _, c := range calls {
		assert.NotContains(t, c, "Delete", "retention tears nothing down: %v", calls)
	}
	// ... and the archive says so.
	items := records(t, ns, "kept-a-while", 2)
	assert.Equal(t, []v1alpha1.ArchiveState{v1alpha1.ArchiveSucceeded, v1alpha1.ArchiveRemoved}, statesOf(items))
	assert.Equal(t, string(created.UID), items[1].Pipeline.UID)
}

// TestDashboardShowsTheHistory: the dashboard's History page lists the archive's records
// of the namespace, a pipeline's finished and deleted states among them, in the browser.
func TestDashboardShowsTheHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, recordPipeline(ns, "remembered", "runner", recordStep("only", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "remembered", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Archived != nil })
	require.NoError(t, client.StepwiseV1alpha1().Pipelines(ns).Delete(ctx, "remembered", metav1.DeleteOptions{}))
	records(t, ns, "remembered", 2)

	url := startDashboard(t, "-n", ns)
	b := browser(t)
	deleted := byTestID("history-row") + `[data-pipeline="remembered"][data-state="Deleted"]`
	within(t, b, time.Minute, chromedp.Navigate(url+"#/history"), chromedp.WaitVisible(chromedp.CSS(deleted)))
	rows, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('`+byTestID("history-row")+`').length`))
	require.NoError(t, err)
	assert.Equal(t, 2, rows, "its Succeeded and Deleted records, and no other namespace's")
	text, err := chromedp.Run(b, chromedp.Text(chromedp.CSS(byTestID("history-row")+`[data-state="Succeeded"]`)))
	require.NoError(t, err)
	assert.Contains(t, text, "1/1")
}
