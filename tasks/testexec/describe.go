package testexec

import "github.com/stepwise-dev/stepwise/pkg/contract"

// Describe documents test.noop for the executor catalogue.
func (Noop) Describe() contract.Description {
	return contract.Description{Description: "Does nothing, at once, in every hook (tests and demos)."}
}

// Describe documents test.record for the executor catalogue.
func (Record) Describe() contract.Description {
	return contract.Description{
		Description: "Appends STEP/HOOK to the key calls of a ConfigMap for every hook it runs (tests and demos).",
		Parameters: []contract.Parameter{
			{Name: "configMap", Description: "ConfigMap to write (default stepwise-record-PIPELINE)."},
			{Name: "gate", Description: "true: Create waits until the ConfigMap has the key open.STEP."},
			{Name: "fail", Description: "permanent or retryable: Create fails that way."},
			{Name: "output", Description: "A value to report as the output value."},
		},
	}
}
