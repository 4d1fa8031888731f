// Command krew-manifest writes the krew plugin manifest of a release of kubectl-stepwise to
// stdout: deploy/krew/stepwise.yaml with {{TAG}} replaced by the release's tag and each
// platform's {{SHA256}} by the SHA-256 of its archive.
//
//	go run ./hack/krew-manifest -version v0.3.0 -dist dist/ > stepwise.yaml
//
// A platform's archive is the last element of its uri, kubectl-stepwise_TAG_OS_ARCH.tar.gz
// with OS and ARCH those of its selector, read from -dist; it must hold the platform's bin,
// an executable file. A platform whose archive is missing is left out, with a note on
// stderr (make krew-manifest builds the host's only); -all makes it an error, for a release.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	tagPlaceholder    = "{{TAG}}"
	sha256Placeholder = "{{SHA256}}"
)

// semver is the form krew wants of spec.version: vMAJOR.MINOR.PATCH, perhaps with a
// pre-release and build metadata.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command: it writes the manifest to stdout and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("krew-manifest", flag.ContinueOnError)
	flags.SetOutput(stderr)
	tag := flags.String("version", "", "The release's tag, e.g. v0.3.0 (required).")
	dist := flags.String("dist", "dist", "The directory of the archives, kubectl-stepwise_TAG_OS_ARCH.tar.gz.")
	template := flags.String("template", filepath.Join("deploy", "krew", "stepwise.yaml"), "The manifest's template.")
	all := flags.Bool("all", false, "Fail when a platform's archive is missing, instead of leaving the platform out.")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if *tag == "" || flags.NArg() > 0 {
		_, _ = fmt.Fprintln(stderr, "usage: krew-manifest -version TAG [-dist DIR] [-template FILE] [-all]")
		return 2
	}
	if !semver.MatchString(*tag) {
		_, _ = fmt.Fprintf(stderr, "warning: krew wants a version such as v1.2.3, not %q\n", *tag)
	}
	text, err := os.ReadFile(*template)
	if err == nil {
		var out []byte
		out, err = manifest(text, *tag, *dist, *all, stderr)
		if err == nil {
			_, err = stdout.Write(out)
		}
	}
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "krew-manifest:", err)
		return 1
	}
	return 0
}

// manifest fills the template text in for tag from the archives in dist.
func manifest(text []byte, tag, dist string, all bool, notes io.Writer) ([]byte, error) {
	if strings.ContainsAny(tag, "/\\ \t\n\"'") {
		return nil, fmt.Errorf("version %q: not a tag", tag)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(bytes.ReplaceAll(text, []byte(tagPlaceholder), []byte(tag)), &doc); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	if len(doc.Content) != 1 {
		return nil, errors.New("template: not one YAML document")
	}
	root := doc.Content[0]
	// The template's comment says how to fill it in; the manifest says where it came from.
	doc.HeadComment, root.HeadComment = "", ""
	if len(root.Content) > 0 {
		root.Content[0].HeadComment = ""
	}
	doc.HeadComment = fmt.Sprintf("The krew manifest of kubectl-stepwise %s, written by hack/krew-manifest from deploy/krew/stepwise.yaml.", tag)
	platforms := lookup(root, "spec", "platforms")
	if platforms == nil || platforms.Kind != yaml.SequenceNode || len(platforms.Content) == 0 {
		return nil, errors.New("template: no spec.platforms")
	}
	var kept []*yaml.Node
	for i, p := range platforms.Content {
		ok, err := fill(p, tag, dist, all, notes)
		if err != nil {
			return nil, fmt.Errorf("platform %d: %w", i+1, err)
		}
		if ok {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("no archive of any platform in %s", dist)
	}
	platforms.Content = kept

	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if bytes.Contains(out.Bytes(), []byte("{{")) {
		return nil, fmt.Errorf("a placeholder is left:\n%s", out.Bytes())
	}
	return out.Bytes(), nil
}

// fill sets the sha256 of platform p from its archive in dist, and reports whether the
// archive is there.
func fill(p *yaml.Node, tag, dist string, all bool, notes io.Writer) (bool, error) {
	goos, goarch := scalar(p, "selector", "matchLabels", "os"), scalar(p, "selector", "matchLabels", "arch")
	uri, bin, sum := scalar(p, "uri"), scalar(p, "bin"), lookup(p, "sha256")
	if goos == "" || goarch == "" || uri == "" || bin == "" || sum == nil {
		return false, errors.New("wants selector.matchLabels.os and arch, uri, sha256 and bin")
	}
	name := path.Base(uri)
	if want := fmt.Sprintf("kubectl-stepwise_%s_%s_%s.tar.gz", tag, goos, goarch); name != want {
		return false, fmt.Errorf("%s/%s: the uri names %s, not %s", goos, goarch, name, want)
	}
	if sum.Value != sha256Placeholder {
		return false, fmt.Errorf("%s/%s: sha256 is %q, not %s", goos, goarch, sum.Value, sha256Placeholder)
	}
	archive := filepath.Join(dist, name)
	data, err := os.ReadFile(archive)
	if errors.Is(err, fs.ErrNotExist) && !all {
		_, _ = fmt.Fprintf(notes, "no %s: %s/%s left out\n", archive, goos, goarch)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := holdsExecutable(data, bin); err != nil {
		return false, fmt.Errorf("%s: %w", archive, err)
	}
	digest := sha256.Sum256(data)
	sum.Value, sum.Style = hex.EncodeToString(digest[:]), yaml.DoubleQuotedStyle
	return true, nil
}

// holdsExecutable checks that the .tar.gz data holds bin, at its top, as an executable file.
func holdsExecutable(data []byte, bin string) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("no %s in it", bin)
		}
		if err != nil {
			return err
		}
		if path.Clean(h.Name) != bin {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", bin)
		}
		return nil
	}
}

// lookup follows keys down mappings from n; nil when one is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
				break
			}
		}
		n = next
	}
	return n
}

// scalar is the value of the scalar at keys under n, empty when there is none.
func scalar(n *yaml.Node, keys ...string) string {
	if v := lookup(n, keys...); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}
