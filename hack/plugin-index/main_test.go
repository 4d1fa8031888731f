package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/index"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

const (
	exampleDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	awsDigest     = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// imagesOut is what hack/images.sh prints for two plugins.
const imagesOut = `bin/images/stepwise-plugin-aws.tar registry.example/stepwise-plugin-aws:v0.3.0 ` + awsDigest + `
stepwise-plugin-aws: image registry.example/stepwise-plugin-aws@` + awsDigest + `
stepwise-plugin-aws: binary sha256 4d2c0a7a0c44b5d2b1b7f5d0c3e1a6f8e9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4
bin/images/stepwise-plugin-example.tar registry.example/stepwise-plugin-example:v0.3.0 ` + exampleDigest + `
stepwise-plugin-example: image registry.example/stepwise-plugin-example@` + exampleDigest + `
stepwise-plugin-example: binary sha256 4d2c0a7a0c44b5d2b1b7f5d0c3e1a6f8e9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4
`

func TestWritesTheProjectsSignedIndex(t *testing.T) {
	dir := t.TempDir()
	private, public, err := signature.Keygen()
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "stepwise-signing.key")
	require.NoError(t, os.WriteFile(keyFile, private, 0o600))
	images := filepath.Join(dir, "images.txt")
	require.NoError(t, os.WriteFile(images, []byte(imagesOut), 0o644))
	plugins := filepath.Join(dir, "plugins")
	require.NoError(t, os.MkdirAll(filepath.Join(plugins, "aws"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(plugins, "aws", "README.md"), []byte(`# stepwise-plugin-aws

A Stepwise plugin serving one executor, **`+"`aws.terminate-instance`"+`**: it terminates the
EC2 instance behind a retired node. It is meant to run between `+"`node.drain`"+` and
[examples/node-retire-aws.yaml](../../examples/node-retire-aws.yaml).

## Parameters
`), 0o644))
	out := filepath.Join(dir, "plugin-index.yaml")

	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-images-out", images, "-signing-key", keyFile, "-plugins", plugins, "-o", out}, &stdout))
	assert.Contains(t, stdout.String(), "wrote "+out+" (2 plugins)")

	// The index passes as an installer checks it, by the public key of the signing key.
	ix, err := index.Load(t.Context(), out, signature.Policy{PublicKey: string(public)}, nil)
	require.NoError(t, err)
	policy := signature.Policy{PublicKey: string(public)}
	assert.Equal(t, []index.Plugin{
		{Name: "aws", Description: "A Stepwise plugin serving one executor, aws.terminate-instance: it terminates the EC2 instance behind a retired node.",
			Image: "registry.example/stepwise-plugin-aws", Digest: awsDigest, Signature: policy},
		{Name: "example", Image: "registry.example/stepwise-plugin-example", Digest: exampleDigest, Signature: policy},
	}, ix.Plugins)

	t.Run("the plugins' key apart from the index's", func(t *testing.T) {
		_, pluginsPublic, err := signature.Keygen()
		require.NoError(t, err)
		pub := filepath.Join(dir, "plugins.pub")
		require.NoError(t, os.WriteFile(pub, pluginsPublic, 0o644))
		require.NoError(t, run(t.Context(), []string{"-images-out", images, "-signing-key", keyFile, "-public-key", pub, "-plugins", plugins, "-o", out}, &stdout))
		ix, err := index.Load(t.Context(), out, signature.Policy{PublicKey: string(public)}, nil)
		require.NoError(t, err)
		assert.Equal(t, string(pluginsPublic), ix.Plugins[0].Signature.PublicKey)
	})

	t.Run("no image lines", func(t *testing.T) {
		empty := filepath.Join(dir, "empty.txt")
		require.NoError(t, os.WriteFile(empty, []byte("bin/images/stepwise-operator.tar stepwise-operator:dev "+exampleDigest+"\n"), 0o644))
		err := run(t.Context(), []string{"-images-out", empty, "-signing-key", keyFile, "-o", out}, &stdout)
		assert.ErrorContains(t, err, `no "stepwise-plugin-NAME: image REPO@sha256:..." line`)
	})
	t.Run("usage", func(t *testing.T) {
		assert.ErrorContains(t, run(t.Context(), []string{"-o", out}, &stdout), "usage: plugin-index")
	})
}
