package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/executor"
)

// sumOf is the SHA-256, in hex, of a plugin TestMain built.
func sumOf(t *testing.T, built string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, built))
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// pluginFiles is a plugin directory: its files (file name -> the built plugin whose bytes
// it holds) and the lines of its checksum file (file name -> SHA-256 in hex).
type pluginFiles struct {
	files map[string]string
	sums  map[string]string
}

// write writes the files into dir and the checksum file at sumsPath.
func (p pluginFiles) write(t *testing.T, dir, sumsPath string) {
	t.Helper()
	for name, built := range p.files {
		b, err := os.ReadFile(filepath.Join(binDir, built))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o755))
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(p.sums)) {
		lines = append(lines, p.sums[name]+"  "+name)
	}
	require.NoError(t, os.WriteFile(sumsPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// TestInstalledPlugins: plugins installed from their own images (copied into InstalledDir)
// are verified against InstalledChecksums only, as the image's are against Dir's
// SHA256SUMS only, and a name the image has already is refused there.
func TestInstalledPlugins(t *testing.T) {
	const (
		test    = "stepwise-plugin-test"
		example = "stepwise-plugin-example"
	)
	testSum, exampleSum := sumOf(t, test), sumOf(t, example)
	wrong := strings.Repeat("ab", sha256.Size)
	testExecutors := []string{"test.block", "test.echo", "test.environ", "test.fail", "test.hostile", "test.logs"}

	tests := []struct {
		name string
		// image is Options.Dir, with its SHA256SUMS; installed is InstalledDir, with
		// InstalledChecksums. nil: not given.
		image, installed *pluginFiles
		// installedSumsMissing: InstalledChecksums names a file that does not exist.
		installedSumsMissing bool
		wantExecutors        []string
		// wantRefused holds, by plugin, what why must contain; {image}, {imageSums},
		// {installed} and {installedSums} stand for the directories and checksum files.
		wantRefused map[string][]string
	}{
		{
			name:          "no installed source: as before",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			wantExecutors: testExecutors,
		},
		{
			name:          "an installed plugin with the right checksum starts",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{example: exampleSum}},
			wantExecutors: append([]string{"example.greet"}, testExecutors...),
		},
		{
			name:          "installed plugins alone, no image directory",
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{example: exampleSum}},
			wantExecutors: []string{"example.greet"},
		},
		{
			name:          "an installed plugin whose checksum is wrong",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{example: wrong}},
			wantExecutors: testExecutors,
			wantRefused: map[string][]string{example: {
				"it did not start: its SHA-256 is " + exampleSum + ", but the checksum file {installedSums} lists " + wrong,
				`"cd {installed} && sha256sum ` + example + `"`,
			}},
		},
		{
			name:          "an image swapped for another plugin",
			installed:     &pluginFiles{files: map[string]string{example: test}, sums: map[string]string{example: exampleSum}},
			wantExecutors: nil,
			wantRefused: map[string][]string{example: {
				"its SHA-256 is " + testSum + ", but the checksum file {installedSums} lists " + exampleSum,
			}},
		},
		{
			name:          "an installed plugin missing from its checksum file",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{}},
			wantExecutors: testExecutors,
			wantRefused:   map[string][]string{example: {"it is not listed in the checksum file {installedSums}"}},
		},
		{
			name:          "an installed plugin listed only in the image's checksum file",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum, example: exampleSum}},
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{}},
			wantExecutors: testExecutors,
			wantRefused:   map[string][]string{example: {"it is not listed in the checksum file {installedSums}"}},
		},
		{
			name:          "an image's plugin listed only in the installed checksum file",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{}},
			installed:     &pluginFiles{files: map[string]string{example: example}, sums: map[string]string{test: testSum, example: exampleSum}},
			wantExecutors: []string{"example.greet"},
			wantRefused:   map[string][]string{test: {"it is not listed in the checksum file {imageSums}"}},
		},
		{
			name:                 "no installed checksum file",
			image:                &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			installed:            &pluginFiles{files: map[string]string{example: example}},
			installedSumsMissing: true,
			wantExecutors:        testExecutors,
			wantRefused:          map[string][]string{example: {"no checksum file to verify it against", "{installedSums}"}},
		},
		{
			// Both verify: the image's runs (test.*), not the installed one (example.greet).
			name:          "a name in both directories",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			installed:     &pluginFiles{files: map[string]string{test: example}, sums: map[string]string{test: exampleSum}},
			wantExecutors: testExecutors,
			wantRefused: map[string][]string{test: {
				"a plugin of that name is in the image already, in {image}, so " + filepath.Join("{installed}", test) + " is not started",
			}},
		},
		{
			name:          "a name in both directories, refused in the image",
			image:         &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{}},
			installed:     &pluginFiles{files: map[string]string{test: test}, sums: map[string]string{test: testSum}},
			wantExecutors: nil,
			wantRefused: map[string][]string{test: {
				"it is not listed in the checksum file {imageSums}; a plugin of that name is in the image already",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			placeholders := []string{}
			if tt.image != nil {
				opts.Dir = t.TempDir()
				tt.image.write(t, opts.Dir, filepath.Join(opts.Dir, "SHA256SUMS"))
				placeholders = append(placeholders, "{image}", opts.Dir, "{imageSums}", filepath.Join(opts.Dir, "SHA256SUMS"))
			}
			if tt.installed != nil {
				// As the chart mounts them: the checksums (a ConfigMap) apart from the
				// directory the plugin images copy their executables into.
				opts.InstalledDir = t.TempDir()
				opts.InstalledChecksums = filepath.Join(t.TempDir(), "SHA256SUMS")
				tt.installed.write(t, opts.InstalledDir, opts.InstalledChecksums)
				if tt.installedSumsMissing {
					require.NoError(t, os.Remove(opts.InstalledChecksums))
				}
				placeholders = append(placeholders, "{installed}", opts.InstalledDir, "{installedSums}", opts.InstalledChecksums)
			}
			expand := strings.NewReplacer(placeholders...).Replace

			h := New(klog.Background(), opts)
			t.Cleanup(h.Close)
			executors, refused, err := h.start(context.Background())
			require.NoError(t, err)

			var names []string
			for _, e := range executors {
				names = append(names, e.Name())
			}
			slices.Sort(names)
			assert.Equal(t, tt.wantExecutors, names)
			assert.ElementsMatch(t, slices.Collect(maps.Keys(tt.wantRefused)), slices.Collect(maps.Keys(refused)), "refused: %v", refused)
			for name, wants := range tt.wantRefused {
				for _, want := range wants {
					assert.Contains(t, refused[name].Message, expand(want), name)
				}
			}
			assert.Len(t, h.PIDs(), len(slices.Compact(pluginsOf(executors))), "a process for each plugin that started")
		})
	}
}

// pluginsOf names the plugin of each executor, in order.
func pluginsOf(executors []executor.TaskExecutor) []string {
	var out []string
	for _, e := range executors {
		out = append(out, e.(*pluginExecutor).proc.name)
	}
	return out
}

// TestInstalledPluginGetsItsEnvironment: EnvFor, Env and the memory limit apply to the
// plugins of InstalledDir as to the image's.
func TestInstalledPluginGetsItsEnvironment(t *testing.T) {
	installed := t.TempDir()
	sums := filepath.Join(t.TempDir(), "SHA256SUMS")
	pluginFiles{
		files: map[string]string{"stepwise-plugin-test": "stepwise-plugin-test"},
		sums:  map[string]string{"stepwise-plugin-test": sumOf(t, "stepwise-plugin-test")},
	}.write(t, installed, sums)
	h := New(klog.Background(), Options{
		Dir:                pluginDir(t, []string{"stepwise-plugin-example"}, nil),
		InstalledDir:       installed,
		InstalledChecksums: sums,
		Env:                []string{"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8"},
		EnvFor:             map[string][]string{"stepwise-plugin-test": {"STEPWISE_PLUGIN_ALLOWED_CIDRS=127.0.0.0/8,10.20.0.0/16"}},
		MemoryLimit:        256 << 20,
	})
	t.Cleanup(h.Close)
	reg := executor.NewRegistry()
	require.NoError(t, h.Load(context.Background(), reg))
	assert.Equal(t, []string{"example.greet", "test.block", "test.echo", "test.environ", "test.fail", "test.hostile", "test.logs"}, reg.Names())

	assert.Equal(t, "127.0.0.0/8,10.20.0.0/16", showEnv(t, reg, "STEPWISE_PLUGIN_ALLOWED_CIDRS"))
	assert.NotEmpty(t, showEnv(t, reg, "GOMEMLIMIT"))
	res, err := get(t, reg, "test.environ").Create(context.Background(), request(contract.HookCreate, nil))
	require.NoError(t, err)
	assert.NotContains(t, strings.Split(res.Outputs["names"], ","), "HOME", "not the operator's environment")
}

// TestInstalledSourceOptions: an installed directory needs its own checksum file and the
// other way round, and must be another directory than the image's.
func TestInstalledSourceOptions(t *testing.T) {
	dir := pluginDir(t, []string{"stepwise-plugin-test"}, nil)
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "directory alone", opts: Options{Dir: dir, InstalledDir: t.TempDir()}, wantErr: "go together"},
		{name: "checksum file alone", opts: Options{Dir: dir, InstalledChecksums: filepath.Join(dir, "SHA256SUMS")}, wantErr: "go together"},
		{name: "the image's directory", opts: Options{Dir: dir, InstalledDir: dir + "/.", InstalledChecksums: filepath.Join(dir, "SHA256SUMS")}, wantErr: "is given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(klog.Background(), tt.opts)
			t.Cleanup(h.Close)
			err := h.Load(context.Background(), executor.NewRegistry())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Empty(t, h.PIDs(), "nothing started")
		})
	}
}
