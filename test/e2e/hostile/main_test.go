package hostile

import (
	"context"
	"flag"
	"fmt"
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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if !clusterNeeded() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := framework.StartCluster(ctx, framework.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start local cluster: %v\n", err)
		return 1
	}
	cluster = c
	code := func() int {
		if err := c.InstallCRDs(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "install CRDs: %v\n", err)
			return 1
		}
		// As an install has them: they decide who an Approval may name, and stamp who
		// created a pipeline (four eyes).
		if err := c.InstallAdmissionPolicies(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "install admission policies: %v\n", err)
			return 1
		}
		op, err := c.StartOperator(operatorArgs...)
		if err != nil {
			fmt.Fprintf(os.Stderr, "start operator: %v\n", err)
			return 1
		}
		operator = op
		defer func() {
			// The test asserts that it never exited; this reports a failure to stop.
			if err := op.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stop operator: %v\n", err)
			}
		}()
		if err := op.WaitReady(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if code != 0 || *keepFlag {
		c.KeepLogs("hostile")
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop local cluster: %v\n", err)
	}
	return code
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
