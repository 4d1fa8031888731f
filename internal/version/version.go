// Package version is the version the binaries report with --version.
package version

import (
	"runtime/debug"
)

// Version is the version of the binaries. hack/build.sh sets it from git describe:
//
//	go build -ldflags "-X github.com/stepwise-dev/stepwise/internal/version.Version=v0.3.0-2-g1a2b3c4"
//
// Left at "dev", it gets the commit go build stamped into the binary (vcs.revision,
// shortened) and "-dirty" when the work tree had changes: dev-1a2b3c4d5e6f-dirty.
var Version = "dev"

// defaultVersion is Version's value when no -X set it.
const defaultVersion = "dev"

// shortCommit is how many hex digits of the commit a dev version keeps, as Go's
// pseudo-versions do.
const shortCommit = 12

// init runs after the linker set Version: a -X version is kept as it is.
func init() { Version = resolve(Version, debug.ReadBuildInfo) }

// resolve returns v, or, when v is the default, the default with the commit and dirty mark
// of the build info that read returns (nothing when there is none: go test, go run, or a
// build without VCS information).
func resolve(v string, read func() (*debug.BuildInfo, bool)) string {
	if v != defaultVersion {
		return v
	}
	info, ok := read()
	if !ok || info == nil {
		return v
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision == "" {
		return v
	}
	if len(revision) > shortCommit {
		revision = revision[:shortCommit]
	}
	v += "-" + revision
	if modified {
		v += "-dirty"
	}
	return v
}
