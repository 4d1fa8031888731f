// Command image builds Stepwise's container images without a container engine or a
// registry: the operator's (the operator, stepwise-copy next to it, every plugin and their SHA256SUMS, as the
// Dockerfile builds it) or one plugin's (its binary and its signature), from static binaries, on an
// empty base, running as 65532:65532, written as an OCI archive (an OCI image layout in a
// tar) that containerd imports (ctr images import) and skopeo copies to a registry.
//
//	image -operator bin/image/stepwise-operator -plugins bin/image/plugins -tag stepwise-operator:dev -o bin/images/stepwise-operator.tar
//	image -plugin bin/image/plugins/stepwise-plugin-example -tag stepwise-plugin-example:dev -o bin/images/stepwise-plugin-example.tar
//	image -plugin ... -signing-key stepwise-signing.key ...   # signed: the image holds the signature too
//
// It prints the image's digest. The same binaries make the same image (fixed times).
package main

import (
	"archive/tar"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	pluginlayout "github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	operator := fs.String("operator", "", "the operator's static binary, with stepwise-copy's next to it: build the operator's image")
	plugins := fs.String("plugins", "", "with -operator: the directory of the plugins' static binaries and their SHA256SUMS")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "with -operator: the CA bundle the plugins trust (TLS to cloud APIs)")
	plugin := fs.String("plugin", "", "a plugin's static binary: build its own image (with BINARY.sigstore.json, its signature, when it is next to it)")
	signingKey := fs.String("signing-key", "", "with -plugin: sign the binary with this private key (PEM) first, writing BINARY.sigstore.json")
	tag := fs.String("tag", "", "the image's name and tag, e.g. stepwise-operator:v0.3.0")
	out := fs.String("o", "", "the OCI archive to write")
	arch := fs.String("arch", runtime.GOARCH, "the binaries' architecture")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tag == "" || *out == "" || (*operator == "") == (*plugin == "") {
		return errors.New("usage: image (-operator BIN -plugins DIR | -plugin BIN) -tag NAME:TAG -o FILE.tar")
	}
	if *signingKey != "" {
		if *plugin == "" {
			return errors.New("-signing-key signs a plugin: it needs -plugin")
		}
		if err := signPlugin(*plugin, *signingKey); err != nil {
			return err
		}
	}
	s := pluginSpec(*plugin)
	if *operator != "" {
		var err error
		if s, err = operatorSpec(*operator, *plugins, *caBundle); err != nil {
			return err
		}
	}
	img, err := build(s, *arch)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if err := writeArchive(*out, *tag, img); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s %s %s\n", *out, *tag, digest)
	return err
}

// signPlugin signs the plugin binary with the private key in keyFile and writes the
// signature next to it.
func signPlugin(binary, keyFile string) error {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("read the signing key: %w", err)
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read the plugin to sign: %w", err)
	}
	bundleJSON, err := signature.Sign(context.Background(), content, key)
	if err != nil {
		return fmt.Errorf("sign %s: %w", binary, err)
	}
	if err := os.WriteFile(pluginlayout.SignaturePath(binary), bundleJSON, 0o644); err != nil {
		return fmt.Errorf("write the signature of %s: %w", binary, err)
	}
	return nil
}

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
	return tw.Close()
}
