// Command gen-rules writes the operator's Prometheus alert rules (pkg/alerts, default
// thresholds) to the file the chart ships; make reference runs it, and pkg/alerts' tests
// fail when the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/stepwise-dev/stepwise/pkg/alerts"
)

func main() {
	out := flag.String("o", "charts/stepwise/files/prometheus-rules.yaml", "the rule file to write")
	flag.Parse()
	data, err := alerts.YAML(alerts.Default())
	if err == nil {
		err = os.WriteFile(*out, append([]byte(alerts.Header), data...), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-rules:", err)
		os.Exit(1)
	}
}
