// Package layout names a plugin's files: its executable, stepwise-plugin-NAME, and its
// signature next to it. The operator, the SDK's install, the image builder and the
// author's tools read the names here, and import nothing else of each other.
package layout

import "strings"

// Prefix begins the name of every plugin executable: stepwise-plugin-NAME.
const Prefix = "stepwise-plugin-"

// SignatureSuffix ends the name of a plugin's signature (a Sigstore bundle).
const SignatureSuffix = ".sigstore.json"

// Executable is the file name of plugin name's executable.
func Executable(name string) string { return Prefix + name }

// Name is the plugin name of an executable's file name, and whether it is one.
func Name(file string) (string, bool) {
	name, ok := strings.CutPrefix(file, Prefix)
	return name, ok && name != "" && !strings.HasSuffix(file, SignatureSuffix)
}

// SignaturePath is where the signature of the executable at path is: next to it.
func SignaturePath(executable string) string { return executable + SignatureSuffix }

// ServingExecutor is the executable of the plugin that serves an executor by the
// convention kubectl stepwise plugin init writes: plugin NAME serves NAME.something. A
// refused plugin never ran, so nothing else can say which executors it would have served;
// an executor with no dot names no plugin ("").
func ServingExecutor(executor string) string {
	name, _, ok := strings.Cut(executor, ".")
	if !ok || name == "" {
		return ""
	}
	return Executable(name)
}
