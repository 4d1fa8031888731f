package pluginauthor

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	texttemplate "text/template"
)

// pluginTemplates are the files `plugin init` writes, NAME.tmpl for NAME (without its
// leading dot: embed leaves dot files out of a directory).
//
//go:embed plugininit/main.go.tmpl plugininit/main_test.go.tmpl plugininit/README.md.tmpl plugininit/Dockerfile.tmpl plugininit/gitignore.tmpl
var pluginTemplates embed.FS

// pluginTemplateDir is where pluginTemplates keeps them.
const pluginTemplateDir = "plugininit"

// pluginFileNames are the files `plugin init` writes, in the order it names them.
var pluginFileNames = []string{"main.go", "main_test.go", "README.md", "Dockerfile", ".gitignore"}

// pluginTemplateData is what the templates of a plugin's files are given.
type pluginTemplateData struct {
	// Name is the plugin's name, Binary its executable's (stepwise-plugin-NAME) and
	// Executor the name of the executor it serves.
	Name, Binary, Executor string
	// Package is the path of the plugin's package from the directory `plugin init` ran in,
	// the root of the Go module the next steps take it for, as a Docker build context
	// names it: "." for that directory itself (or one outside it), else "./plugins/NAME".
	Package string
	// GoVersion is the golang image's tag the Dockerfile builds with.
	GoVersion string
}

// pluginFile is one file `plugin init` writes.
type pluginFile struct {
	name string
	data []byte
}

// renderPlugin is the files of the plugin called name, whose package is pkg from the
// module's root (pluginTemplateData.Package), the Go files gofmt'ed.
func renderPlugin(name, pkg string) ([]pluginFile, error) {
	data := pluginTemplateData{
		Name: name, Binary: pluginPrefix + name, Executor: executorOf(name), Package: pkg,
		GoVersion: goImageVersion(runtime.Version()),
	}
	var files []pluginFile
	for _, file := range pluginFileNames {
		text, err := fs.ReadFile(pluginTemplates, pluginTemplateDir+"/"+strings.TrimPrefix(file, ".")+".tmpl")
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
		src := b.Bytes()
		if strings.HasSuffix(file, ".go") {
			if src, err = format.Source(src); err != nil {
				return nil, fmt.Errorf("format %s: %w", file, err)
			}
		}
		files = append(files, pluginFile{name: file, data: src})
	}
	return files, nil
}

// goMinor matches the Go release of a toolchain's version, go1.26 of go1.26.8.
var goMinor = regexp.MustCompile(`^go([1-9][0-9]*\.[0-9]+)`)

// goImageVersion is the tag of the golang image of the Go release of goVersion (the
// toolchain that built kubectl-stepwise, as recent as the SDK needs): 1.26 for go1.26.8,
// latest for a development toolchain.
func goImageVersion(goVersion string) string {
	if m := goMinor.FindStringSubmatch(goVersion); m != nil {
		return m[1]
	}
	return "latest"
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
		err := writeExclusive(path, f.data, 0o644)
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

// writeExclusive writes a file that must not exist yet (plugin init's files, a key pair):
// what is there is never overwritten, and a failed write leaves nothing.
func writeExclusive(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
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
