package version

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	const commit = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
	info := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Settings: settings}, true }
	}
	tests := []struct {
		name    string
		version string
		read    func() (*debug.BuildInfo, bool)
		want    string
	}{
		{
			name: "set by -X: kept, whatever the build info", version: "v0.3.0-2-g1a2b3c4-dirty",
			read: info(debug.BuildSetting{Key: "vcs.revision", Value: commit}), want: "v0.3.0-2-g1a2b3c4-dirty",
		},
		{
			name: "go build of a clean tree", version: "dev",
			read: info(debug.BuildSetting{Key: "vcs.revision", Value: commit}, debug.BuildSetting{Key: "vcs.modified", Value: "false"}),
			want: "dev-1a2b3c4d5e6f",
		},
		{
			name: "go build of a changed tree", version: "dev",
			read: info(debug.BuildSetting{Key: "vcs", Value: "git"}, debug.BuildSetting{Key: "vcs.revision", Value: commit},
				debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
			want: "dev-1a2b3c4d5e6f-dirty",
		},
		{name: "a short revision stays whole", version: "dev", read: info(debug.BuildSetting{Key: "vcs.revision", Value: "abc"}), want: "dev-abc"},
		{name: "no VCS information (go test, -buildvcs=false)", version: "dev", read: info(debug.BuildSetting{Key: "GOOS", Value: "linux"}), want: "dev"},
		{name: "modified without a revision says nothing", version: "dev", read: info(debug.BuildSetting{Key: "vcs.modified", Value: "true"}), want: "dev"},
		{name: "no build info", version: "dev", read: func() (*debug.BuildInfo, bool) { return nil, false }, want: "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, resolve(tt.version, tt.read))
		})
	}
}

func TestVersionIsSet(t *testing.T) {
	// go test stamps no VCS information: the default, perhaps with a commit.
	assert.Regexp(t, `^dev(-[0-9a-f]+(-dirty)?)?$`, Version)
}

// TestLinkerSetsVersion: a version set with -ldflags -X, as hack/build.sh does, is what the
// binary reports (init keeps it).
func TestLinkerSetsVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "printversion")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X github.com/stepwise-dev/stepwise/internal/version.Version=v1.2.3-4-gabcdef0-dirty",
		"./testdata/printversion")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin).Output()
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3-4-gabcdef0-dirty\n", string(out))
}
