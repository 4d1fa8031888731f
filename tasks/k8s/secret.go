package k8s

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// k8s.wait copies what it reads into the pipeline's status: the "observed" output and
// messages quoting the value it saw. Whoever may read the Pipeline reads them, and the
// Pipeline's status is no place for credentials, so k8s.wait refuses Secrets before it
// reads one: the kind as written (in any case, as a user might spell it) and the resource
// the API server maps the kind to (in case a kind of another name served Secrets).

// isSecretKind tells whether gk names the core API's Secret.
func isSecretKind(gk schema.GroupKind) bool {
	return gk.Group == "" && strings.EqualFold(gk.Kind, "Secret")
}

// isSecretResource tells whether gr is the core API's secrets.
func isSecretResource(gr schema.GroupResource) bool {
	return gr.Group == "" && gr.Resource == "secrets"
}

// errSecretRefused is the permanent error of a k8s.wait on a Secret.
func errSecretRefused() error {
	return invalidParam("kind", "k8s.wait does not read Secrets: what it observes is copied into the "+
		"pipeline's status (outputs and messages), which whoever may read the Pipeline can read; "+
		"wait on the object that uses the Secret instead")
}
