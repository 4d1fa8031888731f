// Package ociimage builds Stepwise's container images without a container engine or a
// registry: the operator's (the operator, stepwise-copy next to it, every plugin and their
// SHA256SUMS, as the Dockerfile builds it) or one plugin's own (its binary and its
// signature), from static binaries, on an empty base, running as 65532:65532, written as
// an OCI archive (an OCI image layout in a tar) that containerd imports (ctr images
// import) and skopeo copies to a registry. The same binaries make the same image, digest
// included: every time in it is fixed.
//
// hack/image (the repository's builds) and kubectl stepwise plugin image (a plugin's
// author) are its command lines.
package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	pluginlayout "github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// nonRoot is the user and group the images run as (distroless' "nonroot").
const nonRoot = 65532

// createdBy is the image's history entry. It names no command line: the same binaries
// make the same image whichever built it.
const createdBy = "github.com/stepwise-dev/stepwise/pkg/ociimage"

// epoch is every file's time and the image's creation time: the same binaries make the
// same image, digest included.
var epoch = time.Unix(0, 0).UTC()

// file is one entry of an image's only layer.
type file struct {
	path string // absolute, in the image
	mode int64  // permission bits, and the sticky bit
	dir  bool
	// owner is the uid and gid; 0 is root.
	owner int
	// source is the file on this machine whose contents it gets (none for a directory).
	source string
}

// Spec is an image: its files and how it runs. OperatorSpec and PluginSpec make one.
type Spec struct {
	files      []file
	entrypoint []string
	cmd        []string
	ports      []string
}

// OperatorSpec is the operator's image as the Dockerfile builds it: the CA bundle, /tmp
// for the plugins' sockets, the operator, stepwise-copy (next to the operator's binary:
// the chart runs it to copy plugins out of their images), and the plugins of pluginDir
// with their SHA256SUMS.
func OperatorSpec(operator, pluginDir, caBundle string) (Spec, error) {
	s := Spec{
		files: []file{
			{path: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, source: caBundle},
			{path: "/tmp", mode: 0o1777, dir: true, owner: nonRoot},
			{path: "/usr/local/bin/stepwise-operator", mode: 0o755, source: operator},
			{path: "/usr/local/bin/stepwise-copy", mode: 0o755, source: filepath.Join(filepath.Dir(operator), "stepwise-copy")},
		},
		entrypoint: []string{"/usr/local/bin/stepwise-operator"},
		cmd:        []string{"--plugin-dir=/usr/local/lib/stepwise/plugins"},
		ports:      []string{"8080/tcp", "8081/tcp"},
	}
	entries, err := os.ReadDir(pluginDir)
	if err != nil {
		return Spec{}, fmt.Errorf("read the plugins: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (!strings.HasPrefix(name, pluginlayout.Prefix) && name != "SHA256SUMS") {
			continue
		}
		mode := int64(0o755)
		if name == "SHA256SUMS" {
			mode = 0o644
		}
		s.files = append(s.files, file{path: "/usr/local/lib/stepwise/plugins/" + name, mode: mode, source: filepath.Join(pluginDir, name)})
	}
	return s, nil
}

// PluginSpec is a plugin's own image: its binary, which is also its entrypoint, and its
// signature when one is next to it (what the operator verifies the binary against).
func PluginSpec(binary string) Spec {
	name := filepath.Base(binary)
	s := Spec{
		files:      []file{{path: "/" + name, mode: 0o755, source: binary}},
		entrypoint: []string{"/" + name},
	}
	if sig := pluginlayout.SignaturePath(binary); fileExists(sig) {
		s.files = append(s.files, file{path: "/" + filepath.Base(sig), mode: 0o644, source: sig})
	}
	return s
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// WriteArchive builds the image of s for linux/arch and writes it, named tag
// (NAME:TAG), as an OCI archive to out, its directory made if needed. It returns the
// image's digest, what a registry it is copied to serves it by.
func WriteArchive(s Spec, arch, tag, out string) (v1.Hash, error) {
	img, err := build(s, arch)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("digest the image: %w", err)
	}
	if err := writeArchive(out, tag, img); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// build makes the image of s for linux/arch on an empty base, running as 65532:65532.
func build(s Spec, arch string) (v1.Image, error) {
	data, err := layerTar(s.files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: createdBy}})
	if err != nil {
		return nil, fmt.Errorf("add the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read the config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", arch, v1.Time{Time: epoch}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonRoot, nonRoot)
	cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.WorkingDir = s.entrypoint, s.cmd, "/"
	if len(s.ports) > 0 {
		cfg.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.ports {
			cfg.Config.ExposedPorts[p] = struct{}{}
		}
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("set the config: %w", err)
	}
	return img, nil
}

// layerTar is the layer of files: their parent directories first (root's, 0755), then
// each in path order, with fixed times.
func layerTar(files []file) ([]byte, error) {
	files = slices.Clone(files)
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.path] = true
	}
	for _, f := range slices.Clone(files) {
		for dir := path.Dir(f.path); dir != "/" && !seen[dir]; dir = path.Dir(dir) {
			seen[dir] = true
			files = append(files, file{path: dir, mode: 0o755, dir: true})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.path, b.path) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name: strings.TrimPrefix(f.path, "/"), Mode: f.mode, Uid: f.owner, Gid: f.owner,
			ModTime: epoch, Format: tar.FormatPAX,
		}
		var body []byte
		if f.dir {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		} else {
			data, err := os.ReadFile(f.source)
			if err != nil {
				return nil, fmt.Errorf("read %s for %s: %w", f.source, f.path, err)
			}
			hdr.Typeflag, hdr.Size, body = tar.TypeReg, int64(len(data)), data
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
		if _, err := tw.Write(body); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close the layer: %w", err)
	}
	return buf.Bytes(), nil
}
