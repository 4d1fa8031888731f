package contract

// Parameter documents one parameter of an executor.
type Parameter struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Type says how the engine substitutes $(...) references into the value.
	Type ParamType `json:"type,omitempty"`
}

// ParamType says how the engine substitutes references into a parameter's value.
type ParamType string

const (
	// ParamString (the default): references are replaced in the text.
	ParamString ParamType = ""
	// ParamYAML: the value is YAML documents, and references are replaced inside its
	// scalars, after parsing. A substituted value stays one string (or number, or bool)
	// in place: an output from a receiver can never add keys, objects or documents.
	ParamYAML ParamType = "yaml"
)

// Description is what an executor tells of itself, for the executor catalogue and
// `kubectl stepwise executors`.
type Description struct {
	// Version of the executor; empty for built-ins, which have the operator's version.
	Version string `json:"version,omitempty"`
	// Description says in a sentence what the executor does.
	Description string `json:"description,omitempty"`
	// Parameters are the keys of a step's "with" the executor reads.
	Parameters []Parameter `json:"parameters,omitempty"`
	// UpdatesInPlace says that a run with other parameters updates what the last run
	// created and removes what it no longer declares (k8s.apply's inventory): an edit of
	// the step under updatePolicy Rerun re-runs it, where other executors' last run is torn
	// down first.
	UpdatesInPlace bool `json:"updatesInPlace,omitempty"`
	// Plugin names the plugin executable serving the executor; set by the operator, empty
	// for built-ins.
	Plugin string `json:"plugin,omitempty"`
}
