package executor

// Describer is implemented by executors that can say what they do and which parameters
// they take. It is optional: the engine never needs it, but the operator publishes what
// executors describe so that users can find them (kubectl stepwise executors).
type Describer interface {
	Describe() Description
}

// Description documents an executor.
type Description struct {
	// Version of the executor; empty for built-ins, which have the operator's version.
	Version string `json:"version,omitempty"`
	// Description says in a sentence what the executor does.
	Description string `json:"description,omitempty"`
	// Parameters are the keys of a step's "with" the executor reads.
	Parameters []Parameter `json:"parameters,omitempty"`
	// Plugin names the plugin serving the executor; empty for built-ins.
	Plugin string `json:"plugin,omitempty"`
}

// Parameter documents one parameter of an executor.
type Parameter struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Describe returns what e says about itself, or an empty Description when it does not
// implement Describer.
func Describe(e TaskExecutor) Description {
	if d, ok := e.(Describer); ok {
		return d.Describe()
	}
	return Description{}
}
