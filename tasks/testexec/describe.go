package testexec

import "github.com/stepwise-dev/stepwise/pkg/contract"

// Values of test.record's parameter fail.
const (
	FailPermanent = "permanent"
	FailRetryable = "retryable"
)

// Describe documents test.noop for the executor catalogue. It declares no parameter, so
// the engine lets it take any.
func (Noop) Describe() contract.Description {
	return contract.Description{Description: "Does nothing, at once, in every hook (tests and demos)."}
}

// Describe documents test.record for the executor catalogue.
func (Record) Describe() contract.Description {
	return contract.Description{
		Description: "Appends STEP/HOOK to the key calls of a ConfigMap for every hook it runs (tests and demos).",
		Parameters: []contract.Parameter{
			{Name: "configMap", Type: contract.ParamString, Description: "ConfigMap to write (default stepwise-record-PIPELINE)."},
			{Name: "gate", Type: contract.ParamBool, Default: "false", Description: "true: Create waits until the ConfigMap has the key open.STEP."},
			{Name: "fail", Type: contract.ParamEnum, Values: []string{FailPermanent, FailRetryable}, Description: "permanent or retryable: Create fails that way."},
			{Name: "output", Type: contract.ParamString, Description: "A value to report as the output value."},
		},
	}
}
