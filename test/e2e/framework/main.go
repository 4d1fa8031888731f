package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Suite says how an e2e suite's control plane is set up for its tests (Main).
type Suite struct {
	// Name names the logs kept (Cluster.KeepLogs) when a test fails.
	Name    string
	Cluster Options
	// Timeout bounds starting the control plane and setting it up; 0: 3 minutes.
	Timeout time.Duration
	// CRDs and AdmissionPolicies are installed as an install has them (the policies decide
	// whom an Approval may name, and stamp who created a pipeline).
	CRDs, AdmissionPolicies bool
	// OperatorArgs, when not nil, are the arguments the operator starts with on c; Main
	// waits until it is ready, and stops it after the tests.
	OperatorArgs func(c *Cluster) []string
	// Archive starts a PostgreSQL archive before the operator, which then archives there
	// and serves the history API through the aggregation layer (StartArchive).
	Archive bool
	// Setup does what else the suite needs once the above is done; the function it
	// returns, if any, undoes it after the tests.
	Setup func(ctx context.Context, c *Cluster) (func(), error)
	// Ready is given the control plane and the operator (nil without OperatorArgs) before
	// the tests run.
	Ready func(c *Cluster, op *Operator)
	// KeepLogs, when it says so, keeps the logs of a passing run too (a -keep flag).
	KeepLogs func() bool
	// Needed tells whether the tests selected need the control plane; nil: they do.
	Needed func() bool
}

// Main starts the suite's control plane, sets it up, runs the tests and stops what it
// started, the operator first; it returns the code for os.Exit:
//
//	func TestMain(m *testing.M) {
//		os.Exit(framework.Main(m, framework.Suite{Name: "chaos", CRDs: true,
//			Ready: func(c *framework.Cluster, _ *framework.Operator) { cluster = c }}))
//	}
func Main(m *testing.M, s Suite) int {
	if s.Needed != nil && !s.Needed() {
		return m.Run()
	}
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := StartCluster(ctx, s.Cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the local cluster of suite %s: %v\n", s.Name, err)
		return 1
	}
	code := runSuite(ctx, m, c, s)
	if code != 0 || (s.KeepLogs != nil && s.KeepLogs()) {
		c.KeepLogs(s.Name)
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop the local cluster: %v\n", err)
	}
	return code
}

// runSuite sets up the running control plane c and runs the tests.
func runSuite(ctx context.Context, m *testing.M, c *Cluster, s Suite) int {
	if s.CRDs {
		if err := c.InstallCRDs(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "install CRDs: %v\n", err)
			return 1
		}
	}
	if s.AdmissionPolicies {
		if err := c.InstallAdmissionPolicies(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "install admission policies: %v\n", err)
			return 1
		}
	}
	if s.Archive {
		a, err := c.StartArchive(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "start the archive: %v\n", err)
			return 1
		}
		defer func() { _ = a.Close() }()
	}
	var op *Operator
	if s.OperatorArgs != nil {
		var err error
		if op, err = c.StartOperator(s.OperatorArgs(c)...); err != nil {
			fmt.Fprintf(os.Stderr, "start operator: %v\n", err)
			return 1
		}
		defer func() {
			// A suite may assert that the operator never exited; this reports a failure
			// to stop.
			if err := op.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stop operator: %v\n", err)
			}
		}()
		if err := op.WaitReady(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if s.Setup != nil {
		undo, err := s.Setup(ctx, c)
		if err != nil {
			fmt.Fprintf(os.Stderr, "set up suite %s: %v\n", s.Name, err)
			return 1
		}
		if undo != nil {
			defer undo()
		}
	}
	if s.Ready != nil {
		s.Ready(c, op)
	}
	return m.Run()
}
