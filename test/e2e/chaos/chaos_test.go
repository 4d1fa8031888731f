package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// Lease timings of the leader-elected replicas: short, so that a failover takes seconds.
var leaderElectArgs = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=3s",
	"--leader-elect-renew-deadline=2s",
	"--leader-elect-retry-period=500ms",
}

// pluginArgs makes the operator load the plugins `make build` put into bin/plugins.
func pluginArgs() []string { return []string{"--plugin-dir", cluster.BinPath("plugins")} }

// row is one line of the result table.
type row struct {
	phase     string
	pipelines int
	n         counters
	failover  string
	reruns    []int
	wall      time.Duration
	notes     []string
}

func (r row) rerunStats() string {
	if len(r.reruns) == 0 {
		return "-"
	}
	sum := 0
	for _, n := range r.reruns {
		sum += n
	}
	return fmt.Sprintf("%.2f / %d", float64(sum)/float64(len(r.reruns)), slices.Max(r.reruns))
}

// TestChaos runs pipelines through six phases of chaos and checks what at-least-once
// promises (docs/concepts.md, "How a pipeline runs"):
//
//  1. one operator SIGKILLed every 1-4s and started again at once, and SIGKILLed besides,
//     for half of the pipelines, as soon as their record shows a step done (in the middle
//     of the sync that runs the next ones); plugin processes SIGKILLed at random;
//  2. two leader-elected replicas, the leader SIGKILLed in the middle of a sync (failover
//     time measured);
//  3. the API server restarted while pipelines run (the operators must reconnect alone);
//  4. every pipeline deleted, the leader SIGKILLed in the middle of a teardown;
//  5. a drain that brings a replacement up first, the leader SIGKILLed at its moves
//     (drainUnderKills);
//  6. hundreds of pipelines archived and deleted, the leader SIGKILLed every few seconds
//     and the archive's PostgreSQL restarted twice (archiveUnderKills): each has exactly
//     one record per state.
//
// Every pipeline must be Ready; in its record every create hook ran and the first runs come
// in step order; deleting it runs every teardown, the first runs last step first, and leaves
// no finalizer; no plugin process outlives its operator. It prints a table of what was done,
// the failover times and the hooks run again per pipeline.
func TestChaos(t *testing.T) {
	cfg := runConfig()
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("chaos: %s run, seed %d (-chaos.seed=%d repeats the random choices), cluster %s", cfg.name, seed, seed, cluster.Dir)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))

	// The operators make their private copies of the plugins under TMPDIR: a directory of
	// the test's own, so that every process run from there is one of ours, and what a killed
	// operator leaves behind is counted and removed.
	runDir := t.TempDir()
	t.Setenv("TMPDIR", runDir)
	f := newFleet(t, cluster, runDir, rng)
	s := newSuite(t, f)
	ctx := t.Context()

	var rows []row
	var notes []string
	begin := time.Now()
	t.Cleanup(func() { printTable(t, cfg, seed, rows, notes, time.Since(begin)) })

	rows = append(rows, s.crashLoop(ctx, cfg))
	rows = append(rows, s.leaderFailover(ctx, cfg))
	rows = append(rows, s.apiServerRestart(ctx, cfg))
	rows = append(rows, s.teardown(ctx, cfg))
	rows = append(rows, s.drainUnderKills(ctx, cfg))
	rows = append(rows, s.archiveUnderKills(ctx, cfg))

	// The operators stop; no plugin process may be left, and none may have run on without
	// its operator at any time.
	for _, err := range f.stopAll() {
		t.Logf("stop: %v", err) // an exit status after SIGTERM is not what this suite checks
	}
	var left []framework.Process
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		var err error
		left, err = f.pluginProcesses()
		return err == nil && len(left) == 0, nil
	})
	assert.NoError(t, err, "plugin processes outlive the operators that were stopped: %+v", left)
	f.stopWatching()
	assert.Empty(t, f.outlived, "plugin processes outlived their operator")

	f.mu.Lock()
	total := f.n
	exits := slices.Clone(f.exits)
	f.mu.Unlock()
	notes = append(notes, fmt.Sprintf("operator processes started: %d; SIGKILLed: %d; exited on their own: %d", len(f.logs()), total.kills, total.selfExits))
	for _, e := range exits {
		notes = append(notes, "  "+e)
	}
	f.mu.Lock()
	for _, how := range slices.Sorted(maps.Keys(f.leaks)) {
		l := f.leaks[how]
		notes = append(notes, fmt.Sprintf("private plugin copies left in TMPDIR by operators ended by %s: %d operators, %d directories, %.0f MiB (removed by the suite)",
			how, l.operators, l.dirs, float64(l.bytes)/(1<<20)))
	}
	graceful := f.leaks["SIGTERM"]
	f.mu.Unlock()
	assert.Zero(t, graceful.dirs, "operators stopped with SIGTERM left their private plugin copies behind")
	if n, size := leftovers(runDir); n > 0 {
		t.Errorf("%d private plugin directories (%.0f MiB) of no operator the suite knows are left in %s", n, float64(size)/(1<<20), runDir)
	}
}

// crashLoop is phase 1: one operator SIGKILLed every cfg.killEvery and started again, and
// plugin processes SIGKILLed every cfg.pluginKillEvery, while pipelines are created and
// their gates opened at random times.
func (s *suite) crashLoop(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin, before := time.Now(), f.counters()
	ns := tenant(t)
	require.NoError(t, f.add("solo", pluginArgs()...))

	chaos, stop := context.WithTimeout(ctx, cfg.phase1Duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { f.killReplicaUntil(chaos, 0, cfg.killEvery) })
	wg.Go(func() { f.killPluginsUntil(chaos, cfg.pluginKillEvery) })

	// Pipelines are created in the first half of the phase, each gate opened some seconds
	// after its pipeline, all before the chaos ends.
	type event struct {
		at   time.Duration
		name string
		gate bool
	}
	var events []event
	half := cfg.phase1Duration / 2
	for i := range cfg.phase1Pipelines {
		created := f.between([2]time.Duration{0, half})
		opened := created + f.between([2]time.Duration{2 * time.Second, half - time.Second})
		name := fmt.Sprintf("p1-%02d", i)
		events = append(events, event{created, name, false}, event{opened, name, true})
	}
	slices.SortFunc(events, func(a, b event) int { return int(a.at - b.at) })
	byName := map[string]*pipelineRef{}
	for _, e := range events {
		if !sleep(chaos, time.Until(begin.Add(e.at))) {
			break
		}
		var p *pipelineRef
		line := stepGated + "/" + string(v1alpha1.HookPostCreate)
		if !e.gate {
			var err error
			p, err = s.create(ctx, "1", ns, e.name)
			require.NoError(t, err)
			byName[e.name] = p
			line = stepPrepare + "/" + string(v1alpha1.HookPostCreate)
		} else {
			p = byName[e.name]
			if err := s.openGate(ctx, p); err != nil {
				t.Errorf("%v", err)
			}
		}
		// Half of the time, the operator is SIGKILLed as soon as the record shows the
		// first step done (the plugin step and the gate come next in the same sync), or
		// the gated step done (the last step comes next): in the middle of a sync.
		if f.coin() {
			wg.Go(func() {
				if awaitRecord(chaos, p, line, 5*time.Second) {
					if _, err := f.kill(0, true); err != nil {
						t.Errorf("kill operator: %v", err)
					}
				}
			})
		}
	}
	<-chaos.Done()
	wg.Wait()
	ps := s.phase("1")
	readyUnderChaos := 0
	for _, p := range ps {
		if got := s.get(ctx, p); got != nil && succeeded(got) {
			readyUnderChaos++
		}
	}
	t.Logf("phase 1: chaos over after %s, %d/%d pipelines Ready under it", time.Since(begin).Round(time.Second), readyUnderChaos, len(ps))

	// The last operator started lives on: every pipeline must now get to Ready.
	for _, p := range ps {
		if err := s.openGate(ctx, p); err != nil {
			t.Errorf("%v", err)
		}
	}
	s.requireAll(ctx, ps, cfg.readyTimeout)
	return row{
		phase: "1 operator SIGKILL loop + plugin kills", pipelines: len(ps), n: f.counters().minus(before),
		failover: "-", reruns: s.checkCreated(ctx, ps), wall: time.Since(begin),
		notes: []string{fmt.Sprintf("phase 1: %d/%d pipelines were Ready before the chaos ended", readyUnderChaos, len(ps))},
	}
}

// leaderFailover is phase 2: two leader-elected replicas; the leader is SIGKILLed while
// pipelines wait at their gates, and the gate of one is opened at once: failover is the time
// until a running replica holds the Lease, progress until that pipeline passes its gate.
func (s *suite) leaderFailover(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin := time.Now()
	for _, err := range f.stopAll() {
		t.Logf("stop the phase 1 operator: %v", err)
	}
	before := f.counters()
	args := append(pluginArgs(), leaderElectArgs...)
	require.NoError(t, f.add("a", args...))
	require.NoError(t, f.add("b", args...))
	elected, err := s.waitLeader(ctx, "")
	require.NoError(t, err, "no replica took the Lease; logs %v", f.logs())
	t.Logf("phase 2: a replica leads after %s", elected.Round(10*time.Millisecond))

	ns := tenant(t)
	for i := range cfg.phase2Pipelines {
		_, err := s.create(ctx, "2", ns, fmt.Sprintf("p2-%02d", i))
		require.NoError(t, err)
	}
	ps := s.phase("2")
	s.requireAllAt(ctx, ps, cfg.readyTimeout, "at its gate", atGate)

	chaos, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { f.killPluginsUntil(chaos, cfg.pluginKillEvery) })
	var failovers []failover
	for k := range cfg.leaderKills {
		// One pipeline goes on past its gate and the leader dies as soon as its record shows
		// the gated step done, in the middle of the sync that runs the last step; another
		// pipeline is the probe, its gate opened right after the kill.
		aimed := false
		if i := cfg.leaderKills + k; i < len(ps) {
			require.NoError(t, s.openGate(ctx, ps[i]))
			aimed = awaitRecord(ctx, ps[i], stepGated+"/"+string(v1alpha1.HookPostCreate), 10*time.Second)
		}
		failovers = append(failovers, s.killLeader(ctx, ps[k], aimed))
	}
	stop()
	wg.Wait()

	for _, p := range ps {
		require.NoError(t, s.openGate(ctx, p))
	}
	s.requireAll(ctx, ps, cfg.readyTimeout)
	return row{
		phase: "2 two replicas, leader SIGKILL", pipelines: len(ps), n: f.counters().minus(before),
		failover: summary(failovers), reruns: s.checkCreated(ctx, ps), wall: time.Since(begin),
	}
}

// failover is what a leader's death cost: the time from the kill until a running replica
// held the Lease, and until the probe pipeline passed its gate (0 without a probe). ok is
// false when either did not happen in time (the test has failed then).
type failover struct {
	lease, progress time.Duration
	ok              bool
}

// killLeader SIGKILLs the replica that holds the Lease (aimed: at the sight of a hook) and
// opens probe's gate, if any, and measures the failover.
func (s *suite) killLeader(ctx context.Context, probe *pipelineRef, aimed bool) failover {
	t, f := s.t, s.fleet
	var leader int
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		leader, holder = f.leader(ctx)
		return leader >= 0, nil
	})
	if err != nil {
		t.Errorf("no running replica holds the Lease (holder %q); logs %v", holder, f.logs())
		return failover{}
	}
	killed := time.Now()
	pid, err := f.kill(leader, aimed)
	require.NoError(t, err)
	if probe != nil {
		require.NoError(t, s.openGate(ctx, probe))
	}
	if _, err := s.waitLeader(ctx, holder); err != nil {
		t.Errorf("no replica took the Lease over from the killed leader (pid %d) in time; logs %v", pid, f.logs())
		return failover{}
	}
	fo := failover{lease: time.Since(killed), ok: true}
	if probe != nil {
		if _, err := s.waitProgress(ctx, probe); err != nil {
			t.Errorf("%v", err)
			return failover{lease: fo.lease}
		}
		fo.progress = time.Since(killed)
	}
	msg := fmt.Sprintf("killed the leader (pid %d, %s): a running replica held the Lease after %s", pid, holder, fo.lease.Round(10*time.Millisecond))
	if probe != nil {
		msg += fmt.Sprintf(", the probe passed its gate after %s", fo.progress.Round(10*time.Millisecond))
	}
	t.Log(msg)
	return fo
}

// summary writes failovers as "lease 3.1/3.4, progress 3.2/3.5" (seconds).
func summary(fos []failover) string {
	if len(fos) == 0 {
		return "-"
	}
	var lease, progress []string
	for _, fo := range fos {
		if !fo.ok {
			lease = append(lease, "none")
			continue
		}
		lease = append(lease, fmt.Sprintf("%.1f", fo.lease.Seconds()))
		if fo.progress > 0 {
			progress = append(progress, fmt.Sprintf("%.1f", fo.progress.Seconds()))
		}
	}
	out := "lease " + strings.Join(lease, "/")
	if len(progress) > 0 {
		out += ", progress " + strings.Join(progress, "/")
	}
	return out
}

// waitLeader waits until a running replica other than notHolder holds the Lease.
func (s *suite) waitLeader(ctx context.Context, notHolder string) (time.Duration, error) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		i, holder := s.fleet.leader(ctx)
		return i >= 0 && holder != notHolder, nil
	})
	return time.Since(start), err
}

// waitProgress waits until p has passed its gate.
func (s *suite) waitProgress(ctx context.Context, p *pipelineRef) (time.Duration, error) {
	start := time.Now()
	var last *v1alpha1.Pipeline
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if got := s.get(ctx, p); got != nil {
			last = got
		}
		if last != nil && last.Failed() {
			return false, errors.New("it Failed")
		}
		return last != nil && pastGate(last), nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s did not pass its opened gate: %s\n%s", p, describe(last), s.fleet.grepLogs(p.String(), 20))
	}
	return time.Since(start), nil
}

// apiServerRestart is phase 3: the API server is restarted (SIGTERM, down for a moment,
// started again on the same port and etcd) while pipelines run; the operators must
// reconnect by themselves. Recovery is from the API server's readiness until a running
// replica leads and a probe pipeline passes its gate, opened then.
func (s *suite) apiServerRestart(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin, before := time.Now(), f.counters()
	ns := tenant(t)
	for i := range cfg.phase3Pipelines {
		_, err := s.create(ctx, "3", ns, fmt.Sprintf("p3-%02d", i))
		require.NoError(t, err)
	}
	ps := s.phase("3")
	s.requireAllAt(ctx, ps, cfg.readyTimeout, "at its gate", atGate)

	var outages, leads, progress, notes []string
	restarts := len(cfg.apiGrace)
	inflight := ps[restarts:]
	for r, grace := range cfg.apiGrace {
		// Some pipelines run on through the restart, which begins as soon as the record of
		// one shows its gated step done: in the middle of the sync that runs its last step.
		var first *pipelineRef
		for i, p := range inflight {
			if i%restarts == r && i%2 == 0 {
				require.NoError(t, s.openGate(ctx, p))
				if first == nil {
					first = p
				}
			}
		}
		if first != nil {
			awaitRecord(ctx, first, stepGated+"/"+string(v1alpha1.HookPostCreate), 10*time.Second)
		}
		restart, err := cluster.RestartAPIServer(ctx, grace, cfg.apiDown)
		require.NoError(t, err)
		ready := time.Now()
		probe := ps[r]
		require.NoError(t, s.openGate(ctx, probe))
		lead, err := s.waitLeader(ctx, "")
		if err != nil {
			t.Errorf("no running replica holds the Lease after the API server restart; logs %v", f.logs())
		}
		_, err = s.waitProgress(ctx, probe)
		if err != nil {
			t.Errorf("after the API server restart: %v", err)
		}
		how := "SIGKILL"
		if grace > 0 {
			how = fmt.Sprintf("SIGTERM, SIGKILL after %s", grace)
			if !restart.Killed {
				how = "SIGTERM"
			}
		}
		note := fmt.Sprintf("API server restart %d: %s; down %.1f s (stopping %.1f s, kept down %s, starting %.1f s); then a replica led after %.1f s and the probe passed its gate after %.1f s",
			r+1, how, restart.Outage.Seconds(), restart.Stopping.Seconds(), cfg.apiDown, restart.Starting.Seconds(), lead.Seconds(), time.Since(ready).Seconds())
		t.Logf("phase 3: pid %d -> %d: %s", restart.OldPID, restart.NewPID, note)
		notes = append(notes, note)
		outages = append(outages, fmt.Sprintf("%.1f", restart.Outage.Seconds()))
		leads = append(leads, fmt.Sprintf("%.1f", lead.Seconds()))
		progress = append(progress, fmt.Sprintf("%.1f", time.Since(ready).Seconds()))
	}
	for _, p := range ps {
		require.NoError(t, s.openGate(ctx, p))
	}
	s.requireAll(ctx, ps, cfg.readyTimeout)
	return row{
		phase: "3 API server restart", pipelines: len(ps), n: f.counters().minus(before),
		failover: fmt.Sprintf("API down %s; after: lease %s, progress %s", strings.Join(outages, "/"), strings.Join(leads, "/"), strings.Join(progress, "/")),
		reruns:   s.checkCreated(ctx, ps), wall: time.Since(begin), notes: notes,
	}
}

// teardown is phase 4: every pipeline is deleted and the leader SIGKILLed meanwhile; each
// must be gone (its finalizer off) with every teardown hook run, the first runs last step
// first, and no create hook run again.
func (s *suite) teardown(ctx context.Context, cfg config) row {
	t, f := s.t, s.fleet
	begin, before := time.Now(), f.counters()
	// The pipelines are deleted in as many rounds as there are kills; in each, the leader is
	// SIGKILLed as soon as the record of the round's first pipeline shows its last step torn
	// down: in the middle of the sync that tears down the steps before it.
	rounds := max(cfg.teardownKills, 1)
	var failovers []failover
	for k := range rounds {
		round := s.pipelines[k*len(s.pipelines)/rounds : (k+1)*len(s.pipelines)/rounds]
		for _, p := range round {
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				err := s.client.StepwiseV1alpha1().Pipelines(p.ns).Delete(ctx, p.name, metav1.DeleteOptions{})
				return err == nil, nil
			})
			require.NoError(t, err, "delete %s", p)
		}
		if k < cfg.teardownKills && len(round) > 0 {
			aimed := awaitRecord(ctx, round[0], stepFinish+"/"+string(v1alpha1.HookPostDelete), 30*time.Second)
			failovers = append(failovers, s.killLeader(ctx, nil, aimed))
		}
	}
	left := s.waitGone(ctx, s.pipelines, cfg.readyTimeout)
	for p, last := range left {
		t.Errorf("%s was not deleted (a finalizer left?): %s\noperator log lines:\n%s", p, describe(last), f.grepLogs(p.String(), 30))
	}
	var runs []int
	for _, p := range s.pipelines {
		if _, ok := left[p]; ok {
			continue
		}
		lines, err := calls(ctx, p)
		if err != nil {
			t.Errorf("read the record of %s: %v", p, err)
			continue
		}
		// Only the steps whose Create was called are torn down (all of them, for a Ready
		// pipeline), last first.
		var ran []string
		for _, step := range recordingSteps {
			if slices.Contains(lines, step+"/"+string(v1alpha1.HookCreate)) {
				ran = append(ran, step)
			}
		}
		steps := slices.Clone(ran)
		slices.Reverse(steps)
		want := expectedHooks(steps, teardownHooks)
		order := want
		if !s.notReady[p] {
			order = append(expectedHooks(recordingSteps, createHooks), want...)
		}
		for _, problem := range checkOrder(lines, order) {
			t.Errorf("%s: %s; record:\n%s", p, problem, strings.Join(lines, "\n"))
		}
		for _, step := range recordingSteps {
			if !slices.Contains(ran, step) && slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, step+"/") && strings.HasSuffix(l, "Delete") }) {
				t.Errorf("%s: step %s was torn down although its Create never ran; record:\n%s", p, step, strings.Join(lines, "\n"))
			}
		}
		if created := s.createLines[p]; created != createLines(lines) {
			t.Errorf("%s: create hooks ran after the pipeline was Ready: %d create hook runs then, %d now; record:\n%s",
				p, created, createLines(lines), strings.Join(lines, "\n"))
		}
		runs = append(runs, reruns(lines, want))
	}
	return row{
		phase: "4 delete all, leader SIGKILL", pipelines: len(s.pipelines), n: f.counters().minus(before),
		failover: summary(failovers), reruns: runs, wall: time.Since(begin),
	}
}

// phase returns the pipelines made in a phase.
func (s *suite) phase(name string) []*pipelineRef {
	var out []*pipelineRef
	for _, p := range s.pipelines {
		if p.phase == name {
			out = append(out, p)
		}
	}
	return out
}

// requireAll fails the test for every pipeline of ps that is not Ready (Succeeded) within
// timeout, with its status and the operators' log lines about it.
func (s *suite) requireAll(ctx context.Context, ps []*pipelineRef, timeout time.Duration) {
	s.t.Helper()
	s.requireAllAt(ctx, ps, timeout, "Ready", succeeded)
}

// requireAllAt fails the test for every pipeline of ps for which cond does not hold within
// timeout, or that Failed (it stays so until someone asks for a retry: no use waiting).
func (s *suite) requireAllAt(ctx context.Context, ps []*pipelineRef, timeout time.Duration, what string, cond func(*v1alpha1.Pipeline) bool) {
	s.t.Helper()
	done := func(p *v1alpha1.Pipeline) bool { return cond(p) || p.Failed() }
	for p, last := range s.waitAll(ctx, ps, timeout, done) {
		s.failed(ctx, p, last, "not "+what+" within "+timeout.String())
	}
	for _, p := range ps {
		if got := s.get(ctx, p); got != nil && got.Failed() {
			s.failed(ctx, p, got, "Failed")
		}
	}
}

// failed fails the test for a pipeline that did not get where it should, saying where it is,
// with its Events and the operators' log lines about it; its record is not checked further.
func (s *suite) failed(ctx context.Context, p *pipelineRef, last *v1alpha1.Pipeline, what string) {
	s.t.Helper()
	if s.notReady == nil {
		s.notReady = map[*pipelineRef]bool{}
	}
	if s.notReady[p] {
		return
	}
	s.notReady[p] = true
	var events []string
	if list, err := cluster.Client.CoreV1().Events(p.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.name}); err == nil {
		for _, e := range list.Items {
			events = append(events, fmt.Sprintf("%s %s %s: %s", e.LastTimestamp.Format(time.TimeOnly), e.Type, e.Reason, e.Message))
		}
	}
	slices.Sort(events)
	s.t.Errorf("%s %s: %s\nevents:\n%s\noperator log lines naming it:\n%s", p, what, describe(last), strings.Join(events, "\n"), s.fleet.grepLogs(p.String(), 30))
}

// checkCreated checks the record of every Ready pipeline of ps: every create hook ran, the
// first runs in step order, and the plugin's output reached the step after it. It returns
// the create hooks run again, per pipeline.
func (s *suite) checkCreated(ctx context.Context, ps []*pipelineRef) []int {
	t := s.t
	want := expectedHooks(recordingSteps, createHooks)
	var runs []int
	for _, p := range ps {
		lines, err := calls(ctx, p)
		if err != nil {
			t.Errorf("read the record of %s: %v", p, err)
			continue
		}
		if s.createLines == nil {
			s.createLines = map[*pipelineRef]int{}
		}
		s.createLines[p] = createLines(lines)
		if s.notReady[p] {
			continue // reported already
		}
		for _, problem := range checkOrder(lines, want) {
			t.Errorf("%s: %s; record:\n%s", p, problem, strings.Join(lines, "\n"))
		}
		for _, l := range lines {
			if !slices.Contains(want, l) {
				t.Errorf("%s: unexpected hook %q before deletion; record:\n%s", p, l, strings.Join(lines, "\n"))
			}
		}
		if got := s.get(ctx, p); got != nil && len(got.Status.Steps) > gatedIndex {
			assert.Equal(t, "Hello, "+p.name+"!", got.Status.Steps[gatedIndex].Outputs["value"], "%s: the plugin's output reaches the next step", p)
		}
		runs = append(runs, reruns(lines, want))
	}
	return runs
}

// createLines counts the create hook runs of a record.
func createLines(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasSuffix(l, "Create") {
			n++
		}
	}
	return n
}

// leftovers counts the private plugin directories under dir, and their size.
func leftovers(dir string) (int, int64) {
	dirs, _ := filepath.Glob(filepath.Join(dir, "stepwise-plugins-*"))
	var size int64
	for _, d := range dirs {
		size += dirSize(d)
	}
	return len(dirs), size
}

func printTable(t *testing.T, cfg config, seed uint64, rows []row, notes []string, wall time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos (%s run, seed %d): wall %s\n", cfg.name, seed, wall.Round(100*time.Millisecond))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "phase\tpipelines\toperator kills\tplugin kills\tself exits\tfailover (s)\thook re-runs mean / max\twall (s)")
	for _, r := range rows {
		_, _ = fmt.Fprintf(w, "%s\t%d\t%d (%d aimed)\t%d\t%d\t%s\t%s\t%.1f\n", r.phase, r.pipelines, r.n.kills, r.n.aimed, r.n.pluginKills, r.n.selfExits, r.failover, r.rerunStats(), r.wall.Seconds())
	}
	_ = w.Flush()
	var all []string
	for _, r := range rows {
		all = append(all, r.notes...)
	}
	for _, n := range append(all, notes...) {
		b.WriteString(n + "\n")
	}
	b.WriteString("failover: seconds from the SIGKILL of the leader until a running replica held the Lease, and until a probe pipeline, its gate opened right after the kill, passed it; phase 3: from the API server's stop until it was ready again, then from its readiness.\n")
	b.WriteString("re-runs: per pipeline, hook runs beyond the first of each recorded hook (not counting the gate's polls of its Create); phase 4 counts teardown hooks.\n")
	fmt.Print(b.String())
	if *outFlag != "" {
		if err := os.WriteFile(*outFlag, []byte(b.String()), 0o644); err != nil {
			t.Errorf("write %s: %v", *outFlag, err)
		}
	}
}
