// Package node installs Stepwise as its users do, on a node that runs containers: the
// local control plane with a kubelet on Debian's containerd (localcluster up --node), the
// operator's and a plugin's images built by hack/images.sh and loaded into the node as a
// registry would serve them, and the README's commands run as they are written.
package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
	"github.com/stepwise-dev/stepwise/test/e2e/framework"
)

var (
	cluster *framework.Cluster
	// first is what the README's install uses; second, the same code with another
	// version, is what the upgrade brings.
	first, second images
)

// registry is where the images are as the README's $REGISTRY: loading an archive named
// localhost/NAME:TAG into the node is what pushing it to a registry would be.
const registry = "localhost"

// images are the archives of one tag: the operator's, without plugins (they come from
// their own images), and the example plugin's, signed, with its image by digest.
type images struct {
	tag           string
	operator      string
	examplePlugin string
	exampleImage  string // REGISTRY/stepwise-plugin-example@sha256:...
	// index is the plugin index hack/images.sh wrote and signed: the example plugin.
	index string
}

// repushed is an image of other code (testdata/marker) under the first tag of the
// example plugin, with the example's genuine signature: a tag re-pushed.
var repushed string

// repushedMarker is what testdata/marker prints when it runs.
const repushedMarker = "stepwise-e2e: the re-pushed image's code ran"

// signingKey and publicKey are the plugin author's key pair, made by the test;
// otherPublicKey is another's.
var signingKey, publicKey, otherPublicKey string

func TestMain(m *testing.M) {
	os.Exit(framework.Main(m, framework.Suite{Name: "node", Cluster: framework.Options{Node: true}, Timeout: 10 * time.Minute,
		Setup: buildAndLoadImages,
		Ready: func(c *framework.Cluster, _ *framework.Operator) { cluster = c }}))
}

// buildAndLoadImages makes the key pairs, builds the images of two tags and the re-pushed
// one, and loads the two tags' into the node; the function it returns removes the files.
func buildAndLoadImages(ctx context.Context, c *framework.Cluster) (func(), error) {
	stage, err := os.MkdirTemp("", "stepwise-node-images-")
	if err != nil {
		return nil, fmt.Errorf("make a directory for the images: %w", err)
	}
	undo := func() { _ = os.RemoveAll(stage) }
	if err := buildImagesIn(ctx, c, stage); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// buildImagesIn is buildAndLoadImages in the directory stage.
func buildImagesIn(ctx context.Context, c *framework.Cluster, stage string) error {
	var err error
	if signingKey, publicKey, err = writeKeyPair(stage); err != nil {
		return fmt.Errorf("make the plugin author's key pair: %w", err)
	}
	other := filepath.Join(stage, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		return fmt.Errorf("make a directory for another key pair: %w", err)
	}
	if _, otherPublicKey, err = writeKeyPair(other); err != nil {
		return fmt.Errorf("make another key pair: %w", err)
	}
	for _, im := range []*images{&first, &second} {
		tag := "e2e-1"
		if im == &second {
			tag = "e2e-2"
		}
		if *im, err = buildImages(ctx, c.Root(), stage, tag); err != nil {
			return fmt.Errorf("build the images: %w", err)
		}
		if err := c.LoadImages(ctx, im.operator, im.examplePlugin); err != nil {
			return fmt.Errorf("load the images into the node: %w", err)
		}
	}
	if repushed, err = buildRepushed(ctx, c.Root(), stage); err != nil {
		return fmt.Errorf("build the re-pushed image: %w", err)
	}
	return nil
}

// writeKeyPair writes a plugin author's key pair into dir, as `kubectl stepwise plugin
// keygen` does, and returns the files.
func writeKeyPair(dir string) (private, public string, err error) {
	privatePEM, publicPEM, err := signature.Keygen()
	if err != nil {
		return "", "", err
	}
	private, public = filepath.Join(dir, "stepwise-signing.key"), filepath.Join(dir, "stepwise-signing.pub")
	if err := os.WriteFile(private, privatePEM, 0o600); err != nil {
		return "", "", err
	}
	return private, public, os.WriteFile(public, publicPEM, 0o644)
}

// buildImages runs hack/images.sh as `make images IMAGE_REPO=localhost IMAGE_TAG=tag
// SIGNING_KEY=...` would, for the example plugin, with an operator's image that has no plugin of its own
// and a version of tag (so two tags are two images).
func buildImages(ctx context.Context, root, stage, tag string) (images, error) {
	out := filepath.Join(stage, tag)
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "images.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"IMAGE_REPO="+registry, "IMAGE_TAG="+tag, "STEPWISE_VERSION="+tag,
		"PLUGINS=example", "OPERATOR_PLUGINS=",
		"IMAGES_DIR="+out, "LOCALBIN="+filepath.Join(stage, "bin"), "SIGNING_KEY="+signingKey)
	output, err := cmd.CombinedOutput()
	if err != nil {
		return images{}, fmt.Errorf("hack/images.sh: %w\n%s", err, output)
	}
	im := images{
		tag:           tag,
		operator:      filepath.Join(out, "stepwise-operator.tar"),
		examplePlugin: filepath.Join(out, "stepwise-plugin-example.tar"),
	}
	// "stepwise-plugin-example: image REF@DIGEST", as the script prints it for the installer.
	sc := bufio.NewScanner(strings.NewReader(string(output)))
	for sc.Scan() {
		if ref, ok := strings.CutPrefix(sc.Text(), "stepwise-plugin-example: image "); ok {
			im.exampleImage = strings.TrimSpace(ref)
		}
	}
	im.index = filepath.Join(out, "plugin-index.yaml")
	if _, err := os.Stat(im.index); err != nil {
		return images{}, fmt.Errorf("hack/images.sh wrote no plugin index: %w\n%s", err, output)
	}
	if !strings.Contains(im.exampleImage, "@sha256:") {
		return images{}, fmt.Errorf("hack/images.sh printed no image by digest of the example plugin:\n%s", output)
	}
	return im, nil
}

// buildRepushed builds testdata/marker as the example plugin's binary, puts the genuine
// binary's signature (hack/images.sh's, in stage) next to it, and makes its image under
// the first tag, with the image tool hack/images.sh built: what a registry would serve
// after that tag was re-pushed. It returns the archive.
func buildRepushed(ctx context.Context, root, stage string) (string, error) {
	dir := filepath.Join(stage, "repushed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	binary := filepath.Join(dir, "stepwise-plugin-example")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", binary, "./test/e2e/node/testdata/marker")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the marker: %w\n%s", err, out)
	}
	built := filepath.Join(stage, "bin", "image")
	sig, err := os.ReadFile(filepath.Join(built, "plugins", "stepwise-plugin-example.sigstore.json"))
	if err != nil {
		return "", fmt.Errorf("the genuine binary's signature: %w", err)
	}
	if err := os.WriteFile(binary+".sigstore.json", sig, 0o644); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "stepwise-plugin-example.tar")
	image := exec.CommandContext(ctx, filepath.Join(built, "image"), "-plugin", binary,
		"-tag", registry+"/stepwise-plugin-example:"+first.tag, "-o", archive)
	if out, err := image.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image: %w\n%s", err, out)
	}
	return archive, nil
}
