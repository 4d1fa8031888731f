package pluginauthor

import (
	"fmt"
	"maps"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/cli/flagpairs"
	"github.com/stepwise-dev/stepwise/pkg/sdk/egress"
)

// requestFile is what --request FILE may give of the engine's request, in YAML or JSON:
// what the engine hands a hook that a command line makes awkward, such as the outputs of
// the earlier steps. Flags add to it, and win for a key both give.
type requestFile struct {
	Params  map[string]string `json:"params,omitempty"`
	State   map[string]string `json:"state,omitempty"`
	Created map[string]string `json:"created,omitempty"`
	// Outputs are by step name; the step run here is "step".
	Outputs     map[string]map[string]string `json:"outputs,omitempty"`
	Attempt     int32                        `json:"attempt,omitempty"`
	HookStarted *time.Time                   `json:"hookStarted,omitempty"`
	StepStarted *time.Time                   `json:"stepStarted,omitempty"`
}

// readRequestFile reads --request FILE; an unknown field is an error, as a typo would
// otherwise be a request that silently lacks what it meant to give.
func readRequestFile(path string) (*requestFile, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the file the user named
	if err != nil {
		return nil, fmt.Errorf("--request: %w", err)
	}
	var f requestFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("--request %s: %w", path, err)
	}
	return &f, nil
}

// parseInput sets what the request carries besides the parameters and Secrets: from
// --request, then the flags.
func (f *pluginRunFlags) parseInput(r *pluginRun, now time.Time) error {
	in := &requestFile{}
	if f.requestFile != "" {
		var err error
		if in, err = readRequestFile(f.requestFile); err != nil {
			return err
		}
	}
	r.params, r.state, r.created = orEmpty(in.Params), orEmpty(in.State), orEmpty(in.Created)
	r.outputs = map[string]map[string]string{}
	for step, o := range in.Outputs {
		r.outputs[step] = maps.Clone(o)
	}
	for _, given := range []struct {
		what  string
		pairs []string
		into  map[string]string
	}{{"parameter", f.params, r.params}, {"state entry", f.state, r.state}, {"created entry", f.created, r.created}} {
		pairs, err := flagpairs.Parse(given.what, given.pairs)
		if err != nil {
			return err
		}
		maps.Copy(given.into, pairs)
	}
	own, err := flagpairs.Parse("step output", f.stepOutputs)
	if err != nil {
		return err
	}
	if len(own) > 0 {
		if r.outputs[runStep] == nil {
			r.outputs[runStep] = map[string]string{}
		}
		maps.Copy(r.outputs[runStep], own)
	}

	r.attempt = max(in.Attempt, 1)
	if f.attempt > 0 {
		r.attempt = f.attempt
	}
	r.hookStarted = now
	if in.HookStarted != nil {
		r.hookStarted = *in.HookStarted
	}
	if f.hookStarted != "" {
		if r.hookStarted, err = parseStart("--hook-started", f.hookStarted, now); err != nil {
			return err
		}
	}
	r.stepStarted = r.hookStarted
	if in.StepStarted != nil {
		r.stepStarted = *in.StepStarted
	}
	if f.stepStarted != "" {
		if r.stepStarted, err = parseStart("--step-started", f.stepStarted, now); err != nil {
			return err
		}
	}
	if f.allowedCIDRs != "" {
		if _, err := egress.Parse(f.allowedCIDRs); err != nil {
			return fmt.Errorf("--allowed-cidrs: %w", err)
		}
		r.allowedCIDRs = f.allowedCIDRs
	}
	return nil
}

// parseStart reads a start time given as how long ago (25m) or as an RFC 3339 time.
func parseStart(flag, s string, now time.Time) (time.Time, error) {
	if ago, err := time.ParseDuration(s); err == nil {
		if ago < 0 {
			return time.Time{}, fmt.Errorf("%s %s is in the future", flag, s)
		}
		return now.Add(-ago), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is neither how long ago (25m) nor an RFC 3339 time", flag, s)
	}
	return t, nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}
