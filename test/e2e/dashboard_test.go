package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli"
	"github.com/stepwise-dev/stepwise/pkg/pipelineops"
)

var (
	// dashboardPipelines is how many pipelines the first-render test fills a namespace
	// with: a few hundred in make test, 10,000 in `make dashboard-bench`.
	dashboardPipelines = flag.Int("dashboard.pipelines", 300, "pipelines in the namespace of the dashboard's first-render test")
	// dashboardScreenshots, when set, is where the browser tests write their screenshots
	// (docs/ holds the committed ones).
	dashboardScreenshots = flag.String("dashboard.screenshots", "", "directory to write the dashboard's screenshots to")
)

// startDashboard runs `kubectl stepwise dashboard` (port 0) with extra args until the test
// ends, and returns the URL it printed.
func startDashboard(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	var errOut strings.Builder
	done := make(chan int, 1)
	go func() {
		streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: w, ErrOut: &errOut}
		done <- cli.Execute(ctx, append([]string{"dashboard", "--port", "0", "--kubeconfig", cluster.Kubeconfig}, args...), streams, nil)
		_ = w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the dashboard did not stop")
		}
	})
	urls := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if _, url, ok := strings.Cut(lines.Text(), " at "); ok {
				urls <- url
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case url := <-urls:
		return url
	case code := <-done:
		t.Fatalf("the dashboard exited with %d: %s", code, errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("the dashboard printed no URL")
	}
	return ""
}

// browser is a headless Debian chromium (make chromium installs it) for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is missing: make chromium installs it")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1366, 768),
		chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The browser starts with the first action on ctx itself: one on a context with a
	// deadline would tie the browser's life to that deadline.
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

// within runs the actions with a deadline.
func within(t *testing.T, ctx context.Context, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// eventually evaluates expr in the page until it is true, or fails the test after d.
func eventually(t *testing.T, ctx context.Context, d time.Duration, expr, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		return err == nil && ok, nil
	})
	require.NoError(t, err, what)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if *dashboardScreenshots == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(*dashboardScreenshots, name), png, 0o644))
}

func byTestID(id string) string { return `[data-testid="` + id + `"]` }

// TestDashboardListTimelineAndRetry: the list shows a running pipeline; its page's
// timeline gains a bar when the next step starts, without a reload; a failed pipeline is
// retried from its page and succeeds.
func TestDashboardListTimelineAndRetry(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	client := stepwiseClient(t)
	p := recordPipeline(ns, "gated", "runner",
		recordStep("prepare", map[string]string{"gate": "true"}),
		recordStep("finish", nil),
	)
	_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "gated", time.Minute, func(p *v1alpha1.Pipeline) bool {
		return len(p.Status.Steps) > 0 && strings.Contains(p.Status.Steps[0].Message, "waiting for key")
	})

	url := startDashboard(t, "-n", ns)
	b := browser(t)
	row := byTestID("pipeline-row") + `[data-name="gated"]`
	within(t, b, time.Minute, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(row)))
	text, err := chromedp.Run(b, chromedp.Text(chromedp.CSS(row)))
	require.NoError(t, err)
	assert.Contains(t, text, "Running")
	screenshot(t, b, "dashboard-list.png")

	within(t, b, time.Minute, chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.CSS(byTestID("timeline"))))
	bars := `document.querySelectorAll('` + byTestID("timeline-bar") + `').length`
	eventually(t, b, 30*time.Second, bars+` === 1`, "one bar while the first step runs")
	openGate(t, ns, "stepwise-record-gated", "prepare")
	eventually(t, b, time.Minute, bars+` === 2`, "the second step's bar appears, live")
	eventually(t, b, time.Minute, `document.querySelector('`+byTestID("pipeline-phase")+`').textContent.includes('Succeeded')`, "the phase follows")
	screenshot(t, b, "dashboard-timeline.png")

	// A step failing Forbidden, retried from the page once the right is given.
	serviceAccount(t, ns, "late", false)
	failing := recordPipeline(ns, "failing", "late", recordStep("first", nil))
	failing.Spec.Steps[0].Retry = &v1alpha1.RetryPolicy{Limit: 0}
	_, err = client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, failing, metav1.CreateOptions{})
	require.NoError(t, err)
	waitPipeline(t, ns, "failing", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	cluster.Grant(t, ns, "late", "late-configmaps",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update", "patch", "delete"}})
	within(t, b, time.Minute, chromedp.Navigate(url+"#/pipelines/"+ns+"/failing"),
		chromedp.WaitVisible(chromedp.CSS(byTestID("action-retry"))),
		chromedp.Click(chromedp.CSS(byTestID("action-retry"))),
		chromedp.WaitVisible(chromedp.CSS(byTestID("dialog-confirm"))),
		chromedp.Click(chromedp.CSS(byTestID("dialog-confirm"))))
	waitPipeline(t, ns, "failing", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	eventually(t, b, time.Minute, `document.querySelector('`+byTestID("pipeline-phase")+`').textContent.includes('Succeeded')`, "the page shows the retried pipeline succeed")
}

// TestDashboardForbidden: a user who may not get or list pipelines sees a clear forbidden
// message, and no pipeline.
func TestDashboardForbidden(t *testing.T) {
	t.Parallel()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", true)
	_, err := stepwiseClient(t).StepwiseV1alpha1().Pipelines(ns).Create(t.Context(),
		recordPipeline(ns, "secret-plans", "runner", recordStep("one", nil)), metav1.CreateOptions{})
	require.NoError(t, err)
	serviceAccount(t, ns, "nosy", false)

	url := startDashboard(t, "-n", ns, "--as", "system:serviceaccount:"+ns+":nosy")
	b := browser(t)
	within(t, b, time.Minute, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(byTestID("alert"))))
	eventually(t, b, 30*time.Second, `document.querySelector('`+byTestID("alert")+`').textContent.includes('Forbidden')`, "a forbidden message")
	html, err := chromedp.Run(b, chromedp.Evaluate[string](`document.body.innerText`))
	require.NoError(t, err)
	assert.NotContains(t, html, "secret-plans", "nothing of the pipelines")
}

// TestDashboardFirstRender: the list's first page renders in the browser with many
// pipelines in the namespace; the time from navigation to the first render is logged
// (make dashboard-bench runs it with 10,000).
func TestDashboardFirstRender(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	client := stepwiseClient(t)
	n := *dashboardPipelines
	work := make(chan int)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			for i := range work {
				// An executor nobody serves: the operator fails it at once, one status
				// write, and nothing runs.
				p := recordPipeline(ns, fmt.Sprintf("p-%05d", i), "", v1alpha1.Step{Name: "one", Executor: "no.such"})
				_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
				errs <- err
			}
		}()
	}
	go func() {
		for i := range n {
			work <- i
		}
		close(work)
	}()
	for range n {
		require.NoError(t, <-errs)
	}

	url := startDashboard(t, "-n", ns)
	b := browser(t)
	start := time.Now()
	within(t, b, 2*time.Minute, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`body[data-rendered="pipelines"]`)))
	took := time.Since(start)
	total, err := chromedp.Run(b, chromedp.Text(chromedp.CSS(byTestID("pipelines-total"))))
	require.NoError(t, err)
	assert.Contains(t, strings.ReplaceAll(total, ",", ""), fmt.Sprint(n), "the total counts every pipeline")
	rows, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('`+byTestID("pipeline-row")+`').length`))
	require.NoError(t, err)
	assert.Equal(t, min(n, 100), rows, "one page")
	t.Logf("first render of the list with %d pipelines: %s", n, took.Round(time.Millisecond))
}

// TestDashboardPausesAndResumesATrigger: a trigger is paused from its card, with a reason,
// in the name of the user the dashboard acts as (the admission policy checks it), and
// resumed; the card shows the pause as the trigger records it.
func TestDashboardPausesAndResumesATrigger(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	triggerRetirer(t, ns)
	client := stepwiseClient(t)
	_, err := client.StepwiseV1alpha1().PipelineTemplates(ns).Create(ctx, retireTemplate(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.StepwiseV1alpha1().PipelineTriggers(ns).Create(ctx, nodeTrigger(ns, "retirer", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	me, err := pipelineops.WhoAmI(ctx, cluster.Client)
	require.NoError(t, err)

	url := startDashboard(t, "-n", ns)
	b := browser(t)
	within(t, b, time.Minute, chromedp.Navigate(url+"#/triggers"),
		chromedp.WaitVisible(chromedp.CSS(byTestID("trigger-pause"))),
		chromedp.Click(chromedp.CSS(byTestID("trigger-pause"))),
		chromedp.WaitVisible(chromedp.CSS("#pause-reason")),
		chromedp.SendKeys(chromedp.CSS("#pause-reason"), "INC-42"),
		chromedp.Click(chromedp.CSS(byTestID("dialog-confirm"))))
	paused := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Paused != nil
	})
	assert.Equal(t, &v1alpha1.TriggerPause{By: me, Reason: "INC-42"}, paused.Spec.Pause)
	assert.Equal(t, "False/"+v1alpha1.TriggerReasonPaused, readyReason(paused))
	eventually(t, b, time.Minute, `document.body.textContent.includes('by `+me+` since')`, "the card shows who paused it")

	within(t, b, time.Minute,
		chromedp.WaitVisible(chromedp.CSS(byTestID("trigger-resume"))),
		chromedp.Click(chromedp.CSS(byTestID("trigger-resume"))),
		chromedp.WaitVisible(chromedp.CSS(byTestID("dialog-confirm"))),
		chromedp.Click(chromedp.CSS(byTestID("dialog-confirm"))))
	resumed := waitTrigger(t, ns, "retire", time.Minute, func(tr *v1alpha1.PipelineTrigger) bool {
		return tr.Status.Resumed != nil && tr.Status.Paused == nil
	})
	assert.Nil(t, resumed.Spec.Pause)
	assert.Equal(t, me, resumed.Status.Resumed.By)
}

// TestDashboardApprovesAndRejectsAStep: a step that waits for approval is approved from
// the pipeline's page, with a comment, in the name of the user the dashboard acts as (the
// admission policy checks the name, and that the user has the verb approve: the admin is
// in system:masters); the pipeline goes on and succeeds, its status recording the
// decision. Another pipeline's step is rejected from its page: without a comment the page
// asks for one; with one, the step fails with it.
func TestDashboardApprovesAndRejectsAStep(t *testing.T) {
	ctx := t.Context()
	ns := cluster.CreateNamespace(t)
	serviceAccount(t, ns, "runner", false)
	client := stepwiseClient(t)
	for _, name := range []string{"approved", "rejected"} {
		p := recordPipeline(ns, name, "runner",
			v1alpha1.Step{Name: "prepare", Executor: "test.noop"},
			v1alpha1.Step{Name: "release", Executor: "test.noop", Approval: &v1alpha1.ApprovalPolicy{}})
		_, err := client.StepwiseV1alpha1().Pipelines(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	me, err := pipelineops.WhoAmI(ctx, cluster.Client)
	require.NoError(t, err)
	waitPipeline(t, ns, "approved", time.Minute, awaitingApproval("release"))

	url := startDashboard(t, "-n", ns)
	b := browser(t)
	ofRelease := `[data-step="release"]`
	approve := byTestID("step-approve") + ofRelease
	reject := byTestID("step-reject") + ofRelease
	comment := byTestID("step-approval-comment") + ofRelease
	status := `document.querySelector('` + byTestID("step-approval-status") + ofRelease + `').textContent`
	phase := `document.querySelector('` + byTestID("pipeline-phase") + `').textContent`
	// decision is true once the page lists a decision of me with text, and whether it counted.
	decision := func(text, counted string) string {
		return `[...document.querySelectorAll('` + byTestID("step-decision") + `')].some((r) => r.dataset.user === '` + me +
			`' && r.textContent.includes('` + text + `') && r.textContent.includes('` + counted + `'))`
	}

	within(t, b, time.Minute, chromedp.Navigate(url+"#/pipelines/"+ns+"/approved"),
		chromedp.WaitVisible(chromedp.CSS(approve)))
	eventually(t, b, 30*time.Second, status+`.includes('Waiting for 1 approval')`, "the step says what it waits for")
	blockedBy := `document.querySelector('` + byTestID("pipeline-blocked-by") + `').textContent`
	eventually(t, b, 30*time.Second, blockedBy+`.includes('Approval (step release)') && `+blockedBy+`.includes('kubectl stepwise approve approved release')`,
		"the header says what holds the pipeline back, from status.blockedBy")
	screenshot(t, b, "dashboard-approval.png")
	within(t, b, time.Minute,
		chromedp.SendKeys(chromedp.CSS(comment), "CHG-1234 approved"),
		chromedp.Click(chromedp.CSS(approve)))
	p := waitPipeline(t, ns, "approved", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineSucceeded })
	wait := stepOf(p, "release").Approval
	require.NotNil(t, wait)
	require.Len(t, wait.Decisions, 1)
	assert.Equal(t, me, wait.Decisions[0].User, "the dashboard's user, as the API server authenticated them")
	assert.Equal(t, v1alpha1.ApprovalApprove, wait.Decisions[0].Decision)
	assert.Equal(t, "CHG-1234 approved", wait.Decisions[0].Comment)
	assert.True(t, wait.Decisions[0].Counted)
	assert.NotNil(t, wait.ApprovedTime)
	assert.Equal(t, v1alpha1.StepSucceeded, stepOf(p, "release").Phase, "the step ran after the approval")
	eventually(t, b, time.Minute, phase+`.includes('Succeeded')`, "the page shows the pipeline succeed")
	eventually(t, b, time.Minute, decision("CHG-1234 approved", "Counted"), "the page lists the decision")

	waitPipeline(t, ns, "rejected", time.Minute, awaitingApproval("release"))
	within(t, b, time.Minute, chromedp.Navigate(url+"#/pipelines/"+ns+"/rejected"),
		chromedp.WaitVisible(chromedp.CSS(reject)),
		chromedp.Click(chromedp.CSS(reject)))
	eventually(t, b, 30*time.Second, `document.querySelector('`+byTestID("alert")+`').textContent.includes('A rejection needs a comment')`,
		"a rejection without a comment is not sent")
	within(t, b, time.Minute,
		chromedp.SendKeys(chromedp.CSS(comment), "not during the freeze"),
		chromedp.Click(chromedp.CSS(reject)))
	p = waitPipeline(t, ns, "rejected", time.Minute, func(p *v1alpha1.Pipeline) bool { return p.Status.Phase == v1alpha1.PipelineFailed })
	release := stepOf(p, "release")
	assert.Equal(t, v1alpha1.StepFailed, release.Phase)
	assert.Equal(t, "rejected by "+me+": not during the freeze", release.Message)
	require.NotNil(t, release.Approval)
	require.Len(t, release.Approval.Decisions, 1, "only the rejection with a comment was sent")
	assert.Equal(t, v1alpha1.ApprovalReject, release.Approval.Decisions[0].Decision)
	assert.True(t, release.Approval.Decisions[0].Counted)
	eventually(t, b, time.Minute, phase+`.includes('Failed')`, "the page shows the pipeline fail")
	eventually(t, b, time.Minute, decision("not during the freeze", "Counted"), "the page lists the rejection")
	eventually(t, b, time.Minute, status+`.includes('rejected by `+me+`: not during the freeze')`, "the step says why it failed")
}
