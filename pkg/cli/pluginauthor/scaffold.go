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
	texttemplate "text/template"
)

// pluginTemplates are the files `plugin init` writes, NAME.tmpl for NAME.
//
//go:embed plugininit/main.go.tmpl plugininit/main_test.go.tmpl
var pluginTemplates embed.FS

// pluginTemplateDir is where pluginTemplates keeps them.
const pluginTemplateDir = "plugininit"

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
