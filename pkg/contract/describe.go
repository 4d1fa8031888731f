package contract

// Parameter declares one parameter of an executor: the engine checks a step's value
// against it before any hook runs (CheckParams), fills in its default, and the request's
// accessors (Request.Duration, Request.URL, ...) read it.
type Parameter struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Type of the value; empty is an untyped (legacy) declaration, read as a string. When
	// every parameter of an executor has a type, its declarations are complete, and a
	// parameter it does not declare is refused.
	Type ParamType `json:"type,omitempty"`
	// Default is the value of a parameter the step does not set.
	Default string `json:"default,omitempty"`
	// Values are the values an enum parameter may take.
	Values []string `json:"values,omitempty"`
}

// ParamType is the type of a parameter's value.
type ParamType string

const (
	// ParamString is any text.
	ParamString ParamType = "string"
	// ParamInt is a whole number, e.g. 3 or -1.
	ParamInt ParamType = "int"
	// ParamBool is true or false.
	ParamBool ParamType = "bool"
	// ParamDuration is a Go duration, e.g. 90s or 10m.
	ParamDuration ParamType = "duration"
	// ParamURL is an absolute http or https URL.
	ParamURL ParamType = "url"
	// ParamEnum is one of the parameter's Values.
	ParamEnum ParamType = "enum"
	// ParamSecret names a Secret in the pipeline's namespace, which the engine reads as
	// the pipeline's ServiceAccount and hands to the hook (Request.Secret). Its name ends
	// in "Secret" (SecretSuffix), e.g. credentialsSecret.
	ParamSecret ParamType = "secret"
	// ParamYAML is YAML documents; the engine substitutes references inside its scalars,
	// after parsing. A substituted value stays one string (or number, or bool) in place: an
	// output from a receiver can never add keys, objects or documents.
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
