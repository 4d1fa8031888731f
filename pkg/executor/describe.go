package executor

import "github.com/stepwise-dev/stepwise/pkg/contract"

// Describer is implemented by executors that can say what they do and which parameters
// they take. It is optional: the engine never needs it, but the operator publishes what
// executors describe so that users can find them (kubectl stepwise executors).
type Describer interface {
	Describe() contract.Description
}

// Describe returns what e says about itself, or an empty Description when it does not
// implement Describer.
func Describe(e TaskExecutor) contract.Description {
	if d, ok := e.(Describer); ok {
		return d.Describe()
	}
	return contract.Description{}
}
