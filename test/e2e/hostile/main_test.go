package hostile

import (
	"flag"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var (
	seedFlag     = flag.Uint64("hostile.seed", 1, "Seed of the object generator; a failure prints the seed to repeat it with.")
	randomFlag   = flag.Bool("hostile.random", false, "Pick a random seed (printed at start and on failure), unless -hostile.seed is given too.")
	countFlag    = flag.Int("hostile.count", 300, "Objects to generate and apply as the tenant.")
	baselineFlag = flag.Int("hostile.baseline", 8, "Canary pipelines measured alone, before the hostile objects.")
	p99Flag      = flag.Duration("hostile.canary-p99", 5*time.Second, "Bound on the 99th percentile of the canary's apply-to-Ready latency under hostile load.")
	keepFlag     = flag.Bool("hostile.keep-logs", false, "Keep the logs of the control plane and the operator even when the run passes.")
)

// chooseSeed is the generator's seed: -hostile.seed, or a random one under -hostile.random
// unless -hostile.seed is given as well (so that `make hostile HOSTILE_ARGS=-hostile.seed=N`
// repeats a run).
func chooseSeed() uint64 {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "hostile.seed" })
	if *randomFlag && !explicit {
		return rand.Uint64()
	}
	return *seedFlag
}

// e2eTest is the test that needs the cluster; TestMain starts none when it is not selected
// (-run Generator runs the generator's tests alone).
const e2eTest = "TestHostileObjects"

// operatorArgs: triggers may watch the bait kinds of the suite.
var operatorArgs = []string{"--trigger-resources=nodes,configmaps", "-v=2"}

var (
	// cluster is the control plane of the package, started by TestMain.
	cluster *framework.Cluster
	// operator is the one operator, started by TestMain, that every hostile object meets.
	operator *framework.Operator
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(framework.Main(m, framework.Suite{Name: "hostile", CRDs: true, AdmissionPolicies: true, Archive: true,
		OperatorArgs: func(*framework.Cluster) []string { return operatorArgs },
		KeepLogs:     func() bool { return *keepFlag },
		Needed:       clusterNeeded,
		Ready:        func(c *framework.Cluster, op *framework.Operator) { cluster, operator = c, op }}))
}

// clusterNeeded tells whether the tests selected by -test.run, -test.skip and -test.list
// include the e2e test. Go matches each level of a pattern against each level of a
// name; the e2e test has no subtests, so the first level decides.
func clusterNeeded() bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	topLevel := func(name string) *regexp.Regexp {
		f := flag.Lookup(name)
		if f == nil || f.Value.String() == "" {
			return nil
		}
		re, err := regexp.Compile(strings.Split(f.Value.String(), "/")[0])
		if err != nil {
			return nil // go test reports the bad pattern itself
		}
		return re
	}
	if re := topLevel("test.run"); re != nil && !re.MatchString(e2eTest) {
		return false
	}
	if re := topLevel("test.skip"); re != nil && re.MatchString(e2eTest) {
		return false
	}
	return true
}
