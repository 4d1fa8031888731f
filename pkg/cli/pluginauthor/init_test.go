package pluginauthor_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/cli"
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
	assert.Contains(t, out, "kubectl stepwise plugin run bin/stepwise-plugin-"+name+" "+name+".hello Create -p name=Ada")

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
