package pluginauthor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func newInitCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "init NAME [--dir DIR]",
		Short: "Write a new executor plugin to start from",
		Long: `Write the Go source of a new plugin, ` + pluginPrefix + `NAME, to DIR (default plugins/NAME,
from the current directory): main.go serves the executor NAME.hello with pkg/sdk (typed
parameters with defaults, a Create hook reading them with the typed accessors), and
main_test.go runs its hook over gRPC and the conformance checks every executor must pass
(pkg/sdk/plugintest). go test passes on them as written. README.md tells how to ship the
plugin as its own image (its binary alone, which the operator's init container runs to
install it), built without a container engine or with the Dockerfile written beside it,
and how to list it in the chart's values.

NAME is a lower-case DNS label (letters, digits, '-'). Existing files are never
overwritten. The files import github.com/stepwise-dev/stepwise/pkg/sdk: write them inside
this repository, or in a module of your own that requires it.`,
		Example: `  kubectl stepwise plugin init acme
  go test ./plugins/acme
  go build -o ` + pluginDir + `/` + pluginPrefix + `acme ./plugins/acme
  kubectl stepwise plugin run ` + pluginDir + `/` + pluginPrefix + `acme acme.hello Create -p name=Ada`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			name := args[0]
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return fmt.Errorf("plugin name %q is not a lower-case DNS label: %s", name, strings.Join(errs, "; "))
			}
			if dir == "" {
				dir = filepath.Join("plugins", name)
			}
			files, err := renderPlugin(name, contextPackage(dir))
			if err != nil {
				return err
			}
			if err := writeNewFiles(dir, files); err != nil {
				return err
			}
			pkg := filepath.ToSlash(filepath.Clean(dir))
			if !filepath.IsAbs(dir) && !strings.HasPrefix(pkg, ".") {
				pkg = "./" + pkg // a package path, not an import path
			}
			return printNextSteps(streams.Out, dir, files, name, pkg)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "Directory to write the plugin's files to. Default: plugins/NAME.")
	return cmd
}

// pluginDir is where the next steps build plugins: the directory `make plugin` fills in
// this repository.
const pluginDir = "bin/plugins"

// contextPackage is the path of the package in dir from the current directory, as a
// Docker build context there names it (pluginTemplateData.Package): "./plugins/acme", or
// "." for the current directory itself or a directory outside it (a module of its own).
func contextPackage(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "."
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "."
	}
	return "./" + filepath.ToSlash(rel)
}

// printNextSteps tells how to try the plugin written to dir, then how to have the operator
// load it: the operator starts only the plugins its checksum file lists, with the SHA-256
// of the file as built, so a build alone is refused. Shipping it as its own image is in
// the README it wrote.
func printNextSteps(w io.Writer, dir string, files []pluginFile, name, pkg string) error {
	binary := pluginDir + "/" + pluginPrefix + name
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.name)
	}
	wrote := strings.Join(paths[:len(paths)-1], ", ") + " and " + paths[len(paths)-1]
	_, err := fmt.Fprintf(w, `Wrote %s: the plugin %s, serving the executor %s.
Try it:
  go test %s
  go build -o %s %s
  kubectl stepwise plugin run %s %s Create -p name=Ada
Load it in the operator, which starts only the plugins whose SHA-256 the SHA256SUMS file of its
plugin directory lists: after every build, write that file again, then restart the operator
with --plugin-dir %s:
  (cd %s && sha256sum %s* >SHA256SUMS)
  stepwise-operator --plugin-dir %s
Or ship it as its own image, the binary alone, which the operator's init container installs:
%s tells how to build it (with or without Docker) and list it in the chart's values.
`, wrote, pluginPrefix+name, executorOf(name),
		pkg, binary, pkg, binary, executorOf(name), pluginDir, pluginDir, pluginPrefix, pluginDir,
		filepath.Join(dir, "README.md"))
	return err
}

// executorOf is the name of the executor of the plugin called name.
func executorOf(name string) string { return name + ".hello" }
