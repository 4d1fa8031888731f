package cli

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	texttemplate "text/template"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
)

// pluginTemplates are the files `plugin init` writes, NAME.tmpl for NAME.
//
//go:embed plugininit/main.go.tmpl plugininit/main_test.go.tmpl
var pluginTemplates embed.FS

// pluginTemplateDir is where pluginTemplates keeps them.
const pluginTemplateDir = "plugininit"

func newPluginInitCommand(o *options) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "init NAME [--dir DIR]",
		Short: "Write a new executor plugin to start from",
		Long: `Write the Go source of a new plugin, ` + pluginPrefix + `NAME, to DIR (default plugins/NAME,
from the current directory): main.go serves the executor NAME.hello with pkg/sdk (typed
parameters with defaults, a Create hook reading them with the typed accessors), and
main_test.go runs its hook over gRPC and the conformance checks every executor must pass
(pkg/sdk/plugintest). go test passes on them as written.

NAME is a lower-case DNS label (letters, digits, '-'). Existing files are never
overwritten. The files import github.com/stepwise-dev/stepwise/pkg/sdk: write them inside
this repository, or in a module of your own that requires it.`,
		Example: `  kubectl stepwise plugin init acme
  go test ./plugins/acme
  go build -o bin/` + pluginPrefix + `acme ./plugins/acme
  kubectl stepwise plugin run bin/` + pluginPrefix + `acme acme.hello Create -p name=Ada`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			name := args[0]
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return fmt.Errorf("plugin name %q is not a lower-case DNS label: %s", name, strings.Join(errs, "; "))
			}
			if dir == "" {
				dir = filepath.Join("plugins", name)
			}
			files, err := renderPlugin(name)
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
			binary := pluginPrefix + name
			_, err = fmt.Fprintf(o.streams.Out, `Wrote %s and %s: the plugin %s, serving the executor %s.
Try it:
  go test %s
  go build -o bin/%s %s
  kubectl stepwise plugin run bin/%s %s Create -p name=Ada
`, filepath.Join(dir, files[0].name), filepath.Join(dir, files[1].name), binary, executorOf(name), pkg, binary, pkg, binary, executorOf(name))
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "Directory to write the plugin's files to. Default: plugins/NAME.")
	return cmd
}

// executorOf is the name of the executor of the plugin called name.
func executorOf(name string) string { return name + ".hello" }

// pluginFile is one file `plugin init` writes.
type pluginFile struct {
	name string
	data []byte
}

// renderPlugin is the files of the plugin called name, gofmt'ed.
func renderPlugin(name string) ([]pluginFile, error) {
	data := struct{ Name, Binary, Executor string }{Name: name, Binary: pluginPrefix + name, Executor: executorOf(name)}
	var files []pluginFile
	for _, file := range []string{"main.go", "main_test.go"} {
		text, err := fs.ReadFile(pluginTemplates, pluginTemplateDir+"/"+file+".tmpl")
		if err != nil {
			return nil, fmt.Errorf("template of %s: %w", file, err)
		}
		tmpl, err := texttemplate.New(file).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("template of %s: %w", file, err)
		}
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("write %s: %w", file, err)
		}
		src, err := format.Source(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("format %s: %w", file, err)
		}
		files = append(files, pluginFile{name: file, data: src})
	}
	return files, nil
}

// writeNewFiles writes files to dir, made if needed, and refuses to overwrite any: when
// one exists, it writes none.
func writeNewFiles(dir string, files []pluginFile) error {
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		_, err := os.Lstat(path)
		switch {
		case err == nil:
			return fmt.Errorf("%s exists: plugin init writes new files only (choose another --dir)", path)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("check %s: %w", path, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the plugin's directory: %w", err)
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		// O_EXCL: a file made since the check above is not overwritten either.
		err := writeExclusive(path, f.data)
		if err != nil {
			for _, w := range written {
				_ = os.Remove(w)
			}
			return err
		}
		written = append(written, path)
	}
	return nil
}

func writeExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
