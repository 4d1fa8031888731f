package pluginauthor_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/cli"
	"github.com/stepwise-dev/stepwise/pkg/executor"
	"github.com/stepwise-dev/stepwise/pkg/plugin/host"
)

// TestPluginInitWritesAPluginThatPasses writes a plugin inside this module, as a user of
// the repository would, and runs go vet and go test on it.
func TestPluginInitWritesAPluginThatPasses(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	// A fresh directory of the module (digits end its name: a DNS label), removed at the
	// end whatever happens.
	dir, err := os.MkdirTemp(filepath.Join(root, "plugins"), "zz-init-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	name := filepath.Base(dir)

	code, out, errOut := runPlugin(t, "init", name, "--dir", dir)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "the plugin stepwise-plugin-"+name+", serving the executor "+name+".hello")
	assert.Contains(t, out, "kubectl stepwise plugin run bin/plugins/stepwise-plugin-"+name+" "+name+".hello Create -p name=Ada")

	for _, args := range [][]string{{"vet", "./plugins/" + name}, {"test", "-count=1", "./plugins/" + name}} {
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %v:\n%s", args, out)
	}
}

func TestPluginInit(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// existing are files in the directory before init.
		existing []string
		wantCode int
		wantErr  string
		// wantFiles are in plugins/acme after init.
		wantFiles []string
	}{
		{name: "the default directory", args: []string{"acme"}, wantFiles: []string{"main.go", "main_test.go"}},
		{name: "another directory", args: []string{"acme", "--dir", "elsewhere"}},
		{name: "an existing file", args: []string{"acme"}, existing: []string{"main_test.go"}, wantCode: cli.ExitError,
			wantErr: filepath.Join("plugins", "acme", "main_test.go") + " exists: plugin init writes new files only", wantFiles: []string{"main_test.go"}},
		{name: "capitals", args: []string{"Acme"}, wantCode: cli.ExitError, wantErr: `plugin name "Acme" is not a lower-case DNS label`},
		{name: "a dot", args: []string{"acme.io"}, wantCode: cli.ExitError, wantErr: "is not a lower-case DNS label"},
		{name: "a leading dash", args: []string{"-acme"}, wantCode: cli.ExitError, wantErr: "unknown shorthand flag"},
		{name: "no name", args: []string{}, wantCode: cli.ExitError, wantErr: "accepts 1 arg(s), received 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			dir := filepath.Join("plugins", "acme")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			for _, f := range tt.existing {
				require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("mine"), 0o644))
			}
			code, _, errOut := runPlugin(t, append([]string{"init"}, tt.args...)...)
			require.Equal(t, tt.wantCode, code, errOut)
			assert.Contains(t, errOut, tt.wantErr)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var files []string
			for _, e := range entries {
				files = append(files, e.Name())
			}
			assert.Equal(t, tt.wantFiles, files)
			for _, f := range tt.existing {
				data, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err)
				assert.Equal(t, "mine", string(data), "never overwritten")
			}
		})
	}
}

// TestPluginInitNextStepsLoadThePlugin follows the steps `plugin init` prints, as an author
// would, up to an operator's plugin host: a plugin built where they say, with the checksum
// file they write, is loaded from the directory they give the operator. The build is this
// test binary, which serves test.echo as a plugin (TestMain): the steps are what is tested,
// not the generated plugin.
func TestPluginInitNextStepsLoadThePlugin(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errOut := runPlugin(t, "init", "acme")
	require.Equal(t, cli.ExitOK, code, errOut)

	commands := map[string][]string{} // by its first word
	var checksumLine string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		line = strings.TrimSpace(line)
		if strings.Contains(line, "sha256sum") {
			checksumLine = line
		}
		fields := strings.Fields(line)
		commands[fields[0]] = fields
	}
	assert.Equal(t, []string{"go", "build", "-o", "bin/plugins/stepwise-plugin-acme", "./plugins/acme"}, commands["go"])
	assert.Equal(t, []string{"stepwise-operator", "--plugin-dir", "bin/plugins"}, commands["stepwise-operator"])
	require.NotEmpty(t, checksumLine, "a command writes the checksum file:\n%s", out)

	// The build, where the build command puts it.
	built := commands["go"][3]
	require.NoError(t, os.MkdirAll(filepath.Dir(built), 0o755))
	copyTestBinary(t, built)
	sh := exec.CommandContext(t.Context(), "sh", "-c", checksumLine)
	shOut, err := sh.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", checksumLine, shOut)

	h := host.New(klog.Background(), host.Options{Dir: commands["stepwise-operator"][2]})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(t.Context(), reg))
	assert.Contains(t, reg.Names(), "test.echo", "why not: %v", reg.Missing("test.echo"))
}

// copyTestBinary copies this test binary to path, executable.
func copyTestBinary(t *testing.T, path string) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	src, err := os.Open(self)
	require.NoError(t, err)
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}
