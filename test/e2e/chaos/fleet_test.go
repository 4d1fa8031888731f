package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

// leaseName is the operator's default --leader-elect-id; its Lease lives in its --namespace.
const leaseName = "stepwise-operator"

// restartDelay is how soon a replica that exited on its own is started again; a kubelet
// would back off longer, but the suite only needs to avoid a hot loop.
const restartDelay = time.Second

// replica is one operator "pod": the supervisor starts it again whenever it exits, as a
// kubelet restarts a container.
type replica struct {
	name string
	args []string
	op   *framework.Operator
	// started is when op was started.
	started time.Time
	// killedPID is the process the suite killed on purpose, whose exit is no surprise.
	killedPID int
	// stopping: being stopped for good, not to be started again.
	stopping bool
}

// counters are what a phase did to the operators.
type counters struct {
	kills       int // operator processes SIGKILLed by the suite
	aimed       int // of which at the sight of a hook in a record
	pluginKills int // plugin processes SIGKILLed by the suite
	selfExits   int // operator processes that exited on their own
}

func (c counters) minus(o counters) counters {
	return counters{c.kills - o.kills, c.aimed - o.aimed, c.pluginKills - o.pluginKills, c.selfExits - o.selfExits}
}

// fleet runs the operator replicas and the chaos done to them, and watches that no plugin
// process outlives its operator.
type fleet struct {
	t        *testing.T
	c        *framework.Cluster
	runDir   string // TMPDIR of the operators: where their private plugin copies live
	hostname string
	rng      *rand.Rand

	mu       sync.Mutex
	replicas []*replica
	all      []*framework.Operator // every operator process ever started
	n        counters
	exits    []string // why replicas exited on their own
	orphans  map[int]time.Time
	outlived []string // plugin processes seen without their operator for too long
	stopped  bool
	// leaks counts, by how the operator ended, the private plugin directories it left
	// behind, and their bytes.
	leaks map[string]leak

	stopWatch context.CancelFunc
	watchDone chan struct{}
}

// leak is what operators left in their TMPDIR.
type leak struct {
	operators, dirs int
	bytes           int64
}

// newFleet starts the supervisor and the orphan watch; everything stops, and every
// operator process is stopped by its PID, when the test ends.
func newFleet(t *testing.T, c *framework.Cluster, runDir string, rng *rand.Rand) *fleet {
	hostname, err := os.Hostname()
	if err != nil || hostname == "" {
		hostname = "stepwise"
	}
	f := &fleet{t: t, c: c, runDir: runDir, hostname: hostname, rng: rng, orphans: map[int]time.Time{}, leaks: map[string]leak{}, watchDone: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	f.stopWatch = cancel
	go f.watch(ctx)
	t.Cleanup(func() {
		f.stopWatching()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stopped = true
		for _, op := range f.all {
			select {
			case <-op.Exited():
			default:
				if err := op.Kill(); err != nil {
					t.Logf("kill operator %d: %v", op.PID(), err)
				}
			}
		}
	})
	return f
}

func (f *fleet) stopWatching() {
	f.stopWatch()
	<-f.watchDone
}

// add starts a replica.
func (f *fleet) add(name string, args ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &replica{name: name, args: args}
	if err := f.startLocked(r); err != nil {
		return err
	}
	f.replicas = append(f.replicas, r)
	return nil
}

func (f *fleet) startLocked(r *replica) error {
	// Replicas share this machine's ports: none serves the history API (the archive is
	// read from PostgreSQL itself), or all but the first would fail to listen and exit.
	op, err := f.c.StartOperator(append(slices.Clone(r.args), "--history-secure-port=0")...)
	if err != nil {
		return fmt.Errorf("start replica %s: %w", r.name, err)
	}
	r.op, r.started = op, time.Now()
	f.all = append(f.all, op)
	return nil
}

// stopAll stops every replica with SIGTERM, as a rollout would, and forgets them once they
// have exited (until then their plugins are theirs).
func (f *fleet) stopAll() []error {
	f.mu.Lock()
	replicas := slices.Clone(f.replicas)
	for _, r := range replicas {
		r.stopping = true
	}
	f.mu.Unlock()
	var errs []error
	for _, r := range replicas {
		if err := r.op.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("replica %s (pid %d): %w", r.name, r.op.PID(), err))
		}
		f.mu.Lock()
		f.reapLocked(r.op, "SIGTERM")
		f.replicas = slices.DeleteFunc(f.replicas, func(o *replica) bool { return o == r })
		f.mu.Unlock()
	}
	return errs
}

// kill SIGKILLs replica i and starts it again at once, as a kubelet restarts a container
// whose process died. aimed counts it as a kill at the sight of a hook. It returns the
// PID it killed.
func (f *fleet) kill(i int, aimed bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.replicas[i]
	pid := r.op.PID()
	r.killedPID = pid
	if err := r.op.Kill(); err != nil {
		return pid, err
	}
	f.reapLocked(r.op, "SIGKILL")
	f.n.kills++
	if aimed {
		f.n.aimed++
	}
	return pid, f.startLocked(r)
}

func (f *fleet) counters() counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// livePIDs are the operator processes running now.
func (f *fleet) livePIDs() map[int]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	live := map[int]bool{}
	for _, r := range f.replicas {
		select {
		case <-r.op.Exited():
		default:
			live[r.op.PID()] = true
		}
	}
	return live
}

// logs lists the log of every operator process started so far.
func (f *fleet) logs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var logs []string
	for _, op := range f.all {
		logs = append(logs, op.Log)
	}
	return logs
}

// watch restarts replicas that exited on their own and watches for orphaned plugins, until
// ctx ends.
func (f *fleet) watch(ctx context.Context) {
	defer close(f.watchDone)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f.superviseOnce()
		f.checkOrphans()
	}
}

func (f *fleet) superviseOnce() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	for _, r := range f.replicas {
		if r.stopping {
			continue
		}
		select {
		case <-r.op.Exited():
		default:
			continue
		}
		if r.op.PID() != r.killedPID {
			r.killedPID = r.op.PID() // counted once
			f.n.selfExits++
			f.exits = append(f.exits, fmt.Sprintf("replica %s (pid %d) exited on its own after %s: %s",
				r.name, r.op.PID(), time.Since(r.started).Round(100*time.Millisecond), lastLines(r.op.Log, "Operator failed", 1)))
			f.reapLocked(r.op, "exit on its own")
		}
		if time.Since(r.started) < restartDelay {
			continue
		}
		if err := f.startLocked(r); err != nil {
			f.t.Errorf("restart %v", err)
		}
	}
}

// reapLocked removes the private plugin directory an operator that has exited left in
// TMPDIR (its log names it), and counts it by how the operator ended: a graceful stop
// removes it, a SIGKILL cannot.
func (f *fleet) reapLocked(op *framework.Operator, how string) {
	data, err := os.ReadFile(op.Log)
	if err != nil {
		return
	}
	re := regexp.MustCompile(regexp.QuoteMeta(f.runDir+string(filepath.Separator)) + `stepwise-plugins-[0-9]+`)
	l := f.leaks[how]
	found := false
	for _, dir := range slices.Compact(slices.Sorted(slices.Values(re.FindAllString(string(data), -1)))) {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		found = true
		l.dirs++
		l.bytes += dirSize(dir)
		if err := os.RemoveAll(dir); err != nil {
			f.t.Errorf("remove %s: %v", dir, err)
		}
	}
	if found {
		l.operators++
	}
	f.leaks[how] = l
}

func dirSize(dir string) int64 {
	var size int64
	_ = filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if info, err := e.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	return size
}

// outlivedGrace is how long a plugin process may run without its operator: the kernel
// kills it (Pdeathsig) as soon as the operator dies, so this only covers the scan's race.
const outlivedGrace = 3 * time.Second

// checkOrphans looks for plugin processes run from the operators' directory whose parent
// is not a running operator of the fleet: their operator died and they did not.
func (f *fleet) checkOrphans() {
	live := f.livePIDs()
	procs, err := f.pluginProcesses()
	if err != nil {
		f.t.Errorf("list plugin processes: %v", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[int]bool{}
	for _, p := range procs {
		if live[p.PID] || live[p.PPID] {
			continue
		}
		seen[p.PID] = true
		first, ok := f.orphans[p.PID]
		if !ok {
			f.orphans[p.PID] = time.Now()
			continue
		}
		if time.Since(first) > outlivedGrace && first.After(time.Time{}) {
			f.outlived = append(f.outlived, fmt.Sprintf("plugin process %d (%s) runs %s after its operator is gone (parent now %d)",
				p.PID, p.Exe, time.Since(first).Round(100*time.Millisecond), p.PPID))
			f.orphans[p.PID] = time.Time{} // reported once
		}
	}
	for pid := range f.orphans {
		if !seen[pid] {
			delete(f.orphans, pid)
		}
	}
}

// pluginProcesses lists the processes run from a plugin copy in the operators' directory.
func (f *fleet) pluginProcesses() ([]framework.Process, error) {
	prefix := f.runDir + string(filepath.Separator)
	return framework.Processes(func(p framework.Process) bool {
		return strings.HasPrefix(p.Exe, prefix) && strings.HasPrefix(filepath.Base(p.Exe), "stepwise-plugin-")
	})
}

// killPlugin SIGKILLs one plugin process of a running operator, picked at random, and
// tells which; "" when there was none.
func (f *fleet) killPlugin() string {
	live := f.livePIDs()
	procs, err := f.pluginProcesses()
	if err != nil {
		return ""
	}
	procs = slices.DeleteFunc(procs, func(p framework.Process) bool { return !live[p.PPID] })
	if len(procs) == 0 {
		return ""
	}
	f.mu.Lock()
	p := procs[f.rng.IntN(len(procs))]
	f.mu.Unlock()
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		return ""
	}
	f.mu.Lock()
	f.n.pluginKills++
	f.mu.Unlock()
	return filepath.Base(p.Exe)
}

// between returns a random duration in [r[0], r[1]).
func (f *fleet) between(r [2]time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return r[0] + time.Duration(f.rng.Int64N(int64(r[1]-r[0])))
}

// coin is heads half of the time.
func (f *fleet) coin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.IntN(2) == 0
}

// sleep waits d, or less when ctx ends first; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// killPluginsUntil kills a plugin process every pluginKillEvery until ctx ends.
func (f *fleet) killPluginsUntil(ctx context.Context, every [2]time.Duration) {
	for sleep(ctx, f.between(every)) {
		f.killPlugin()
	}
}

// killReplicaUntil SIGKILLs replica i every killEvery until ctx ends.
func (f *fleet) killReplicaUntil(ctx context.Context, i int, every [2]time.Duration) {
	for sleep(ctx, f.between(every)) {
		if _, err := f.kill(i, false); err != nil {
			f.t.Errorf("kill operator: %v", err)
		}
	}
}

// leader returns the index of the replica that holds the Lease, and its holder identity;
// -1 when the Lease names no running replica.
func (f *fleet) leader(ctx context.Context) (int, string) {
	lease, err := f.c.Client.CoordinationV1().Leases(framework.OperatorNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return -1, ""
	}
	holder := *lease.Spec.HolderIdentity
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.replicas {
		select {
		case <-r.op.Exited():
			continue
		default:
		}
		if holder == f.hostname+"_"+strconv.Itoa(r.op.PID()) {
			return i, holder
		}
	}
	return -1, holder
}

// lastLines returns the last n lines of a log that contain substr, joined.
func lastLines(path, substr string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var hits []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, substr) {
			hits = append(hits, line)
		}
	}
	if len(hits) > n {
		hits = hits[len(hits)-n:]
	}
	if len(hits) == 0 {
		return "(no log line with " + strconv.Quote(substr) + ")"
	}
	return strings.Join(hits, "\n")
}

// grepLogs returns the last n lines mentioning substr across every operator log.
func (f *fleet) grepLogs(substr string, n int) string {
	var hits []string
	for _, log := range f.logs() {
		data, err := os.ReadFile(log)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, substr) {
				hits = append(hits, filepath.Base(log)+": "+line)
			}
		}
	}
	if len(hits) > n {
		hits = hits[len(hits)-n:]
	}
	if len(hits) == 0 {
		return "(none)"
	}
	return strings.Join(hits, "\n")
}
