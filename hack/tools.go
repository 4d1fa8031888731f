//go:build tools

// Package tools pins the code generators that hack/update-codegen.sh runs, so that
// `go list -m k8s.io/code-generator` finds the version go.mod records.
package tools

import _ "k8s.io/code-generator"
