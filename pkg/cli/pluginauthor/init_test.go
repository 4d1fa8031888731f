package pluginauthor_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

	// The README's signed image without a container engine, its commands as written, run
	// in the plugin's directory with a home of the test's: kubectl stepwise in this
	// process, the build through sh, and no push.
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	commands := shellBlockAfter(t, string(readme), "without a container engine")
	require.Len(t, commands, 5, "keygen, build, image, push, verify:\n%s", readme)
	binary := "stepwise-plugin-" + name
	assert.Equal(t, "kubectl stepwise plugin keygen --dir ~/.stepwise", commands[0])
	assert.Equal(t, "CGO_ENABLED=0 go build -trimpath -o bin/"+binary+" .", commands[1])
	assert.Equal(t, "kubectl stepwise plugin image bin/"+binary+" --signing-key ~/.stepwise/stepwise-signing.key --tag REGISTRY/"+binary+":TAG -o "+binary+".tar", commands[2])
	assert.Equal(t, "skopeo copy oci-archive:"+binary+".tar docker://REGISTRY/"+binary+":TAG", commands[3])
	assert.Equal(t, "kubectl stepwise plugin verify bin/"+binary+" --key ~/.stepwise/stepwise-signing.pub", commands[4])
	assert.NotContains(t, string(readme), "go run", "nothing to run from a module version the proxy may refuse")

	home := t.TempDir()
	inHome := func(command string) string { return strings.ReplaceAll(command, "~", home) }
	kubectlStepwise := func(command string) string {
		args, ok := strings.CutPrefix(inHome(command), "kubectl stepwise plugin ")
		require.True(t, ok, "not a kubectl stepwise plugin command: %s", command)
		t.Chdir(dir)
		code, out, errOut := runPlugin(t, strings.Fields(args)...)
		require.Equal(t, cli.ExitOK, code, "%s:\n%s%s", command, out, errOut)
		return out
	}
	kubectlStepwise(commands[0])
	sh := exec.CommandContext(t.Context(), "sh", "-c", inHome(commands[1]))
	sh.Dir = dir
	built, err := sh.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", commands[1], built)
	imageOut := kubectlStepwise(commands[2])
	assert.Regexp(t, `^`+regexp.QuoteMeta(binary+".tar REGISTRY/"+binary+":TAG sha256:")+`[0-9a-f]{64}\n$`, imageOut)
	assert.FileExists(t, filepath.Join(dir, binary+".tar"))
	// What they built is no source: the plugin's .gitignore leaves it out, asked of git in
	// a repository of its own (this one ignores the test's directory whole).
	repo := t.TempDir()
	gitignore, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitignore"), gitignore, 0o644))
	gitInit := exec.CommandContext(t.Context(), "git", "init", "-q", repo)
	require.NoError(t, gitInit.Run())
	for _, built := range []string{filepath.Join("bin", binary), binary + ".tar", "main.go"} {
		ignored := exec.CommandContext(t.Context(), "git", "check-ignore", "-q", built)
		ignored.Dir = repo
		assert.Equal(t, built != "main.go", ignored.Run() == nil, "git ignores %s", built)
	}
	assert.FileExists(t, filepath.Join(dir, "bin", binary+".sigstore.json"), "signed by plugin image --signing-key")
	kubectlStepwise(commands[4])

	// The binary installs itself and its signature as the init container runs it.
	installDir := t.TempDir()
	install := exec.CommandContext(t.Context(), filepath.Join(dir, "bin", binary), "install", installDir)
	install.Env = []string{}
	installed, err := install.CombinedOutput()
	require.NoError(t, err, "install:\n%s", installed)
	assert.Contains(t, string(installed), "installed "+binary+" (sha256 ")
	assert.FileExists(t, filepath.Join(installDir, binary))
	assert.FileExists(t, filepath.Join(installDir, binary+".sigstore.json"))
}

// shellBlockAfter is the lines of the first ```sh block of a Markdown text after the
// first line containing heading.
func shellBlockAfter(t *testing.T, text, heading string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(text, heading)
	require.True(t, ok, "no %q in:\n%s", heading, text)
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "no sh block after %q", heading)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok, "the sh block after %q does not end", heading)
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

// TestPluginInitImageFiles checks that the files shipping the plugin as its own image are
// written with its name, and with the path of its package from the directory init ran in,
// the Docker build context.
func TestPluginInitImageFiles(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// dir is where the files are written.
		dir     string
		wantPkg string
	}{
		{name: "the default directory", args: []string{"acme"}, dir: filepath.Join("plugins", "acme"), wantPkg: "./plugins/acme"},
		{name: "a module of its own", args: []string{"acme", "--dir", "."}, dir: ".", wantPkg: "."},
		{name: "another directory", args: []string{"acme", "--dir", "tools/acme-plugin"}, dir: filepath.Join("tools", "acme-plugin"), wantPkg: "./tools/acme-plugin"},
		{name: "outside the current directory", args: []string{"acme", "--dir", "../acme"}, dir: filepath.Join("..", "acme"), wantPkg: "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			require.NoError(t, os.Mkdir("work", 0o755))
			t.Chdir("work")
			code, out, errOut := runPlugin(t, append([]string{"init"}, tt.args...)...)
			require.Equal(t, cli.ExitOK, code, errOut)
			assert.Contains(t, out, filepath.Join(tt.dir, "README.md")+" tells how to build it")

			readme, err := os.ReadFile(filepath.Join(tt.dir, "README.md"))
			require.NoError(t, err)
			for _, want := range []string{
				"# stepwise-plugin-acme\n",
				"\nCGO_ENABLED=0 go build -trimpath -o bin/stepwise-plugin-acme .\n",
				"\nkubectl stepwise plugin keygen --dir ~/.stepwise\n",
				"\nkubectl stepwise plugin image bin/stepwise-plugin-acme --signing-key ~/.stepwise/stepwise-signing.key --tag REGISTRY/stepwise-plugin-acme:TAG -o stepwise-plugin-acme.tar\n",
				"\nskopeo copy oci-archive:stepwise-plugin-acme.tar docker://REGISTRY/stepwise-plugin-acme:TAG\n",
				"\nkubectl stepwise plugin verify bin/stepwise-plugin-acme --key ~/.stepwise/stepwise-signing.pub\n",
				"\ndocker build -f " + tt.wantPkg + "/Dockerfile -t REGISTRY/stepwise-plugin-acme:TAG .\n",
				"plugins:\n- name: acme\n  image: REGISTRY/stepwise-plugin-acme@sha256:IMAGE_DIGEST\n  signature:\n    publicKey: |\n",
			} {
				assert.Contains(t, string(readme), want)
			}

			dockerfile, err := os.ReadFile(filepath.Join(tt.dir, "Dockerfile"))
			require.NoError(t, err)
			for _, want := range []string{
				"\nARG PKG=" + tt.wantPkg + "\n",
				"go build -trimpath -o /out/stepwise-plugin-acme \"${PKG}\"\n",
				"\nFROM scratch\nCOPY --from=build /out/stepwise-plugin-acme /stepwise-plugin-acme\nUSER 65532:65532\nENTRYPOINT [\"/stepwise-plugin-acme\"]\n",
			} {
				assert.Contains(t, string(dockerfile), want)
			}
			assert.Contains(t, string(dockerfile), "CGO_ENABLED=0")
		})
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
		{name: "the default directory", args: []string{"acme"}, wantFiles: []string{".gitignore", "Dockerfile", "README.md", "main.go", "main_test.go"}},
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
