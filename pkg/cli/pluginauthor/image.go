package pluginauthor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/ociimage"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// imageArchs are the architectures of the nodes plugin images are built for, the
// operator's own.
const imageArchs = "amd64 or arm64"

func isImageArch(arch string) bool { return arch == "amd64" || arch == "arm64" }

// imageOptions are plugin image's flags.
type imageOptions struct {
	tag, out, signingKey, arch string
}

func newImageCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o imageOptions
	cmd := &cobra.Command{
		Use:   "image BINARY --tag NAME:TAG -o FILE.tar [--signing-key KEY] [--arch amd64|arm64]",
		Short: "Build a plugin's own image, without a container engine, as an OCI archive",
		Long: `Build the image of the plugin binary BINARY (a static Linux executable named
` + pluginPrefix + `NAME) without a container engine or a registry, and write it, named
--tag, as an OCI archive to FILE.tar, for skopeo to push (skopeo copy
oci-archive:FILE.tar docker://NAME:TAG) or containerd to import. The image holds the
binary alone on an empty base, also its entrypoint, run as 65532:65532, and its
signature next to it when BINARY` + layout.SignatureSuffix + ` exists; with --signing-key,
BINARY is signed first, as plugin sign does. The same binary and signature make the same
image, digest included. Prints FILE.tar, the tag and the image's digest, what the chart's
plugins[].image names it by.

The image is for the binary's architecture; --arch checks that it is the nodes' (on
another machine, build with GOOS=linux GOARCH=amd64 or arm64).`,
		Example: `  CGO_ENABLED=0 GOOS=linux go build -trimpath -o bin/` + pluginPrefix + `acme .
  kubectl stepwise plugin image bin/` + pluginPrefix + `acme --signing-key ~/.stepwise/` + signingKeyFile + ` --tag REGISTRY/` + pluginPrefix + `acme:TAG -o ` + pluginPrefix + `acme.tar
  skopeo copy oci-archive:` + pluginPrefix + `acme.tar docker://REGISTRY/` + pluginPrefix + `acme:TAG`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			binary := args[0]
			arch, err := o.check(binary)
			if err != nil {
				return err
			}
			if o.signingKey != "" {
				if _, err := ociimage.SignPlugin(cmd.Context(), binary, o.signingKey); err != nil {
					return err
				}
			}
			digest, err := ociimage.WriteArchive(ociimage.PluginSpec(binary), arch, o.tag, o.out)
			if err != nil {
				return fmt.Errorf("build the image of %s: %w", binary, err)
			}
			// hack/image's line: a script takes the digest at its end either way.
			if _, err := fmt.Fprintf(streams.Out, "%s %s %s\n", o.out, o.tag, digest); err != nil {
				return err
			}
			if _, err := os.Stat(layout.SignaturePath(binary)); err != nil {
				_, err = fmt.Fprintf(streams.ErrOut, "warning: %s has no signature (%s): the operator runs it only when the chart's values give its SHA-256; --signing-key signs it\n",
					binary, layout.SignaturePath(binary))
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.tag, "tag", "", "The image's name and tag, NAME:TAG (e.g. REGISTRY/"+pluginPrefix+"acme:v1.0.0).")
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "The OCI archive to write (its directory is made if missing).")
	cmd.Flags().StringVar(&o.signingKey, "signing-key", "", "Sign BINARY with this private key (PEM, plugin keygen's) first, writing BINARY"+layout.SignatureSuffix+".")
	cmd.Flags().StringVar(&o.arch, "arch", "", "The nodes' architecture, "+imageArchs+", which BINARY must be built for. Default: BINARY's.")
	_ = cmd.MarkFlagRequired("tag")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

// check returns the architecture of the image of binary, or why it would not run as a
// plugin's image: before anything is signed or written, rather than on a node.
func (o *imageOptions) check(binary string) (string, error) {
	if _, ok := layout.Name(filepath.Base(binary)); !ok {
		return "", fmt.Errorf("%s: a plugin binary is named %sNAME, the name the operator looks for in its image", binary, pluginPrefix)
	}
	if name := o.tag[strings.LastIndex(o.tag, "/")+1:]; !strings.Contains(name, ":") || strings.Contains(name, "@") {
		return "", fmt.Errorf("--tag %q: give NAME:TAG (the registry gives the digest)", o.tag)
	}
	if o.arch != "" && !isImageArch(o.arch) {
		return "", fmt.Errorf("--arch %q: Stepwise's images are for %s", o.arch, imageArchs)
	}
	arch, err := ociimage.BinaryArch(binary)
	if err != nil {
		return "", err
	}
	switch {
	case o.arch != "" && arch != o.arch:
		return "", fmt.Errorf("%s is built for linux/%s, not linux/%s: build it with GOOS=linux GOARCH=%s", binary, arch, o.arch, o.arch)
	case !isImageArch(arch):
		return "", fmt.Errorf("%s is built for linux/%s: Stepwise's images are for %s (build it with GOOS=linux GOARCH=amd64 or arm64)",
			binary, arch, imageArchs)
	}
	return arch, nil
}
