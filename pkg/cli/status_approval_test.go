package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/cli/termsafe/termsafetest"
)

// decided are the decisions on build's approval: bob's counted, eve's ignored.
func decided(p *v1alpha1.Pipeline) {
	p.Status.Steps[1].Approval.Decisions = []v1alpha1.ApprovalRecord{
		{Approval: "hello-build-abcde", User: "bob", Decision: v1alpha1.ApprovalApprove, Comment: "CHG-1234",
			Time: *at(time.Minute), Counted: true},
		{Approval: "hello-build-fghij", User: "eve", Decision: v1alpha1.ApprovalApprove, Comment: "lgtm",
			Time: *at(2 * time.Minute), Ignored: "four eyes: eve created the pipeline"},
	}
}

// approvalSection is what the status says below the step table: its lines from the first
// that starts with Approval:.
func approvalSection(t *testing.T, out string) []string {
	t.Helper()
	_, section, ok := strings.Cut(out, "\n\nApproval:")
	if !ok {
		return nil
	}
	return strings.Split(strings.TrimSuffix("Approval:"+section, "\n"), "\n")
}

func TestPrintStatusApproval(t *testing.T) {
	tests := []struct {
		name string
		p    *v1alpha1.Pipeline
		want []string
	}{
		{
			name: "no step asks for approval: nothing more",
			p:    pipeline(v1alpha1.StepRunning),
		},
		{
			name: "waiting, with no decision yet",
			p:    pipeline(v1alpha1.StepRunning, waitsAt("build")),
			want: []string{
				"Approval:    step build",
				"State:       waiting for 1 approval(s) since 2030-01-02T10:00:05Z",
				"Request:     reqbuild",
				"Decisions:   none yet",
			},
		},
		{
			name: "waiting until a deadline, one counted, one ignored",
			p: pipeline(v1alpha1.StepRunning, waitsAt("build"), decided, func(p *v1alpha1.Pipeline) {
				p.Status.Steps[1].Approval.Required = 2
				p.Status.Steps[1].Approval.Deadline = at(time.Hour + 5*time.Second)
			}),
			want: []string{
				"Approval:    step build",
				"State:       waiting for 2 approval(s) since 2030-01-02T10:00:05Z (deadline 2030-01-02T11:00:05Z), 1 so far",
				"Request:     reqbuild",
				"Decisions:   2, 1 counted",
				"  TIME                   USER   DECISION   COUNTED                                        COMMENT",
				"  2030-01-02T10:01:00Z   bob    Approve    counted                                        CHG-1234",
				"  2030-01-02T10:02:00Z   eve    Approve    ignored: four eyes: eve created the pipeline   lgtm",
			},
		},
		{
			name: "approved",
			p: pipeline(v1alpha1.StepRunning, waitsAt("build"), func(p *v1alpha1.Pipeline) {
				s := &p.Status.Steps[1]
				s.Phase = v1alpha1.StepRunning
				s.Approval.ApprovedTime = at(time.Minute)
				s.Approval.Deadline = at(time.Hour)
				s.Approval.Decisions = []v1alpha1.ApprovalRecord{
					{User: "bob", Decision: v1alpha1.ApprovalApprove, Time: *at(time.Minute), Counted: true},
				}
			}),
			want: []string{
				"Approval:    step build",
				"State:       approved at 2030-01-02T10:01:00Z (1 approval(s) required, waited since 2030-01-02T10:00:05Z)",
				"Request:     reqbuild",
				"Decisions:   1, 1 counted",
				"  TIME                   USER   DECISION   COUNTED   COMMENT",
				"  2030-01-02T10:01:00Z   bob    Approve    counted",
			},
		},
		{
			name: "rejected: the step failed",
			p: pipeline(v1alpha1.StepFailed, waitsAt("build"), failedBuild, func(p *v1alpha1.Pipeline) {
				s := &p.Status.Steps[1]
				s.Phase = v1alpha1.StepFailed
				s.Approval.Deadline = at(time.Hour)
				s.Approval.Required = 2
				s.Approval.Decisions = []v1alpha1.ApprovalRecord{
					{User: "erin", Decision: v1alpha1.ApprovalApprove, Time: *at(30 * time.Second), Counted: true},
					{User: "carol", Decision: v1alpha1.ApprovalApprove, Time: *at(time.Minute), Ignored: "carol already decided"},
					{User: "dave", Decision: v1alpha1.ApprovalReject, Comment: "not during\nthe freeze", Time: *at(2 * time.Minute), Counted: true},
				}
			}),
			want: []string{
				"Approval:    step build",
				// A count of approvals so far is for a step that waits.
				"State:       not approved: waited for 2 approval(s) since 2030-01-02T10:00:05Z (deadline 2030-01-02T11:00:00Z)",
				"Request:     reqbuild",
				"Decisions:   3, 2 counted",
				"  TIME                   USER    DECISION   COUNTED                          COMMENT",
				"  2030-01-02T10:00:30Z   erin    Approve    counted",
				"  2030-01-02T10:01:00Z   carol   Approve    ignored: carol already decided",
				"  2030-01-02T10:02:00Z   dave    Reject     counted                          not during the freeze",
			},
		},
		{
			name: "each step that has an approval",
			p: pipeline(v1alpha1.StepRunning, waitsAt("build", "publish"), func(p *v1alpha1.Pipeline) {
				p.Status.Steps[2].Approval.Decisions = []v1alpha1.ApprovalRecord{
					{User: "bob", Decision: v1alpha1.ApprovalApprove, Time: *at(time.Minute), Counted: true, Comment: "ok"},
				}
			}),
			want: []string{
				"Approval:    step build",
				"State:       waiting for 1 approval(s) since 2030-01-02T10:00:05Z",
				"Request:     reqbuild",
				"Decisions:   none yet",
				"",
				"Approval:    step publish",
				"State:       waiting for 1 approval(s) since 2030-01-02T10:00:05Z, 1 so far",
				"Request:     reqpublish",
				"Decisions:   1, 1 counted",
				"  TIME                   USER   DECISION   COUNTED   COMMENT",
				"  2030-01-02T10:01:00Z   bob    Approve    counted   ok",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, PrintStatus(&buf, tt.p, t0.Add(12*time.Second)))
			got := approvalSection(t, buf.String())
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			assert.Equal(t, tt.want, got, "all of it:\n%s", buf.String())
		})
	}
}

// TestStatusCommandShowsApprovals: status NAME shows the approval below the table, with
// what users wrote escaped, and the table stays one row a step.
func TestStatusCommandShowsApprovals(t *testing.T) {
	p := pipeline(v1alpha1.StepRunning, waitsAt("build"), decided, func(p *v1alpha1.Pipeline) {
		p.Status.Steps[1].Approval.Decisions[1].User = "eve" + hostile
		p.Status.Steps[1].Approval.Decisions[1].Comment = hostile
		p.Status.Steps[1].Approval.Decisions[1].Ignored = hostile
	})
	c, _ := fakeClients(p)
	code, out, errOut := run(t, c, "status", "hello")
	require.Equal(t, ExitOK, code, errOut)
	termsafetest.AssertSafe(t, out)
	table, _, ok := strings.Cut(out, "\n\nApproval:")
	require.True(t, ok, out)
	assert.Len(t, tableRows(t, table), 4, "one row a step")
	section := approvalSection(t, out)
	require.Len(t, section, 7, "the approval, its state, its request, its decisions, a header and a row a decision:\n%s", out)
	assert.Contains(t, section[1], "waiting for 1 approval(s) since 2030-01-02T10:00:05Z, 1 so far")
	assert.Equal(t, []string{"2030-01-02T10:01:00Z", "bob", "Approve", "counted", "CHG-1234"}, strings.Fields(section[5]))
	assert.Contains(t, section[6], `eve\x1b]0;pwned\x07\x1b[2J\x1b[31mred FAKE\u009b31m\x7f\xff end`, "shown, visibly")
	assert.Contains(t, section[6], `ignored: \x1b]0;pwned`)
}
