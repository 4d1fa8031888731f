package ociimage

import (
	"archive/tar"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeArchive writes img, named tag, as an OCI image layout in the tar file out: what
// `ctr images import` and `skopeo copy oci-archive:` read.
func writeArchive(out, tag string, img v1.Image) error {
	dir, err := os.MkdirTemp("", "stepwise-image-")
	if err != nil {
		return fmt.Errorf("make a directory for the layout: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the layout: %w", err)
	}
	name, _, _ := strings.Cut(tag, "@")
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		// The tag, as the OCI layout names it, and the full name containerd imports it as.
		"org.opencontainers.image.ref.name": name[strings.LastIndex(name, ":")+1:],
		"io.containerd.image.name":          name,
	})); err != nil {
		return fmt.Errorf("add the image to the layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("make the output directory: %w", err)
	}
	return tarDir(dir, out)
}

// tarDir writes the files under dir, in path order, into the tar file out.
func tarDir(dir, out string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", out, cerr)
		}
	}()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, walkErr error) error {
		if walkErr != nil || p == dir {
			return walkErr
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: epoch, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
