package framework

import (
	"flag"
	"strconv"
)

// DefaultParallel makes n the number of parallel tests of the package unless -parallel was
// given: e2e tests spend their time waiting on the control plane and the operator, so
// more of them than cores (go test's default) keep the cores busy. Call it from TestMain.
func DefaultParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
