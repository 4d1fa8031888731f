package chaos

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var (
	fullFlag = flag.Bool("chaos.full", false, "Run the full chaos suite (minutes) instead of the short one (also STEPWISE_CHAOS_FULL=1).")
	seedFlag = flag.Uint64("chaos.seed", 0, "Seed of the random kills and schedules; 0 picks one (printed).")
	outFlag  = flag.String("chaos.out", "", "Also write the result table to this file.")
	keepFlag = flag.Bool("chaos.keep-logs", false, "Keep the logs of the control plane and of every operator even when the run passes.")
)

// cluster is the control plane of the package, started by TestMain.
var cluster *framework.Cluster

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(framework.Main(m, framework.Suite{Name: "chaos", CRDs: true, Archive: true,
		KeepLogs: func() bool { return *keepFlag },
		Ready:    func(c *framework.Cluster, _ *framework.Operator) { cluster = c }}))
}

// config sizes a run.
type config struct {
	name string

	// Phase 1: one operator SIGKILLed every killEvery (random within), and once more soon
	// after half of the gates open, plugin processes SIGKILLed every pluginKillEvery, for
	// phase1Duration.
	phase1Pipelines int
	phase1Duration  time.Duration
	killEvery       [2]time.Duration
	pluginKillEvery [2]time.Duration

	// Phase 2: two leader-elected replicas, the leader SIGKILLed leaderKills times.
	phase2Pipelines int
	leaderKills     int

	// Phase 3: the API server restarted once per entry of apiGrace, SIGTERMed and then
	// SIGKILLed after that grace (0: SIGKILLed at once), and kept down for apiDown.
	phase3Pipelines int
	apiGrace        []time.Duration
	apiDown         time.Duration

	// Teardown: the leader SIGKILLed teardownKills times while every pipeline is deleted.
	teardownKills int

	// Drain: the leader SIGKILLed at the first drainKills moves of a drain that brings a
	// replacement up first (recorded, scaled up, evicted).
	drainKills int

	// Archive: archivePipelines pipelines of instant steps created and deleted while the
	// leader is SIGKILLed every archiveKillEvery, the archive's PostgreSQL restarted twice.
	archivePipelines int
	archiveKillEvery [2]time.Duration

	// readyTimeout bounds each wait for pipelines to be Ready, or gone.
	readyTimeout time.Duration
}

var (
	shortRun = config{
		name:            "short",
		phase1Pipelines: 4, phase1Duration: 15 * time.Second,
		killEvery: [2]time.Duration{time.Second, 4 * time.Second}, pluginKillEvery: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
		phase2Pipelines: 3, leaderKills: 1,
		phase3Pipelines: 3, apiGrace: []time.Duration{5 * time.Second}, apiDown: time.Second,
		teardownKills:    1,
		drainKills:       2,
		archivePipelines: 200, archiveKillEvery: [2]time.Duration{time.Second, 3 * time.Second},
		readyTimeout: 2 * time.Minute,
	}
	fullRun = config{
		name:            "full",
		phase1Pipelines: 24, phase1Duration: 2 * time.Minute,
		killEvery: [2]time.Duration{time.Second, 4 * time.Second}, pluginKillEvery: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
		phase2Pipelines: 12, leaderKills: 3,
		phase3Pipelines: 12, apiGrace: []time.Duration{5 * time.Second, 0}, apiDown: 3 * time.Second,
		teardownKills:    2,
		drainKills:       3,
		archivePipelines: 600, archiveKillEvery: [2]time.Duration{time.Second, 3 * time.Second},
		readyTimeout: 3 * time.Minute,
	}
)

func runConfig() config {
	if *fullFlag || os.Getenv("STEPWISE_CHAOS_FULL") == "1" {
		return fullRun
	}
	return shortRun
}
