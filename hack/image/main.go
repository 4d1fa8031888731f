// Command image builds Stepwise's container images without a container engine or a
// registry (pkg/ociimage): the operator's (the operator, stepwise-copy next to it, every
// plugin and their SHA256SUMS, as the Dockerfile builds it) or one plugin's (its binary and
// its signature), from static binaries, on an empty base, running as 65532:65532, written
// as an OCI archive (an OCI image layout in a tar) that containerd imports (ctr images
// import) and skopeo copies to a registry. hack/images.sh runs it for the repository's
// images; a plugin's author has the same as kubectl stepwise plugin image.
//
//	image -operator bin/image/stepwise-operator -plugins bin/image/plugins -tag stepwise-operator:dev -o bin/images/stepwise-operator.tar
//	image -plugin bin/image/plugins/stepwise-plugin-example -tag stepwise-plugin-example:dev -o bin/images/stepwise-plugin-example.tar
//	image -plugin ... -signing-key stepwise-signing.key ...   # signed: the image holds the signature too
//
// It prints the archive, the tag and the image's digest. The same binaries make the same
// image (fixed times).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/stepwise-dev/stepwise/pkg/ociimage"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
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
		if _, err := ociimage.SignPlugin(ctx, *plugin, *signingKey); err != nil {
			return err
		}
	}
	s := ociimage.PluginSpec(*plugin)
	if *operator != "" {
		var err error
		if s, err = ociimage.OperatorSpec(*operator, *plugins, *caBundle); err != nil {
			return err
		}
	}
	digest, err := ociimage.WriteArchive(s, *arch, *tag, *out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s %s %s\n", *out, *tag, digest)
	return err
}
