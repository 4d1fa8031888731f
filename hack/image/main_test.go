package main

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/ociimage"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// The images' contents are pkg/ociimage's tests; these check that the flags build the
// image they name, byte for byte what ociimage writes, and print it as hack/images.sh reads.

// inputs writes fake binaries: the operator, stepwise-copy next to it, two plugins with
// their SHA256SUMS, a CA bundle.
func inputs(t *testing.T) (operator, plugins, ca string) {
	t.Helper()
	dir := t.TempDir()
	plugins = filepath.Join(dir, "plugins")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	write := func(path, data string) {
		require.NoError(t, os.WriteFile(path, []byte(data), 0o755))
	}
	operator, ca = filepath.Join(dir, "stepwise-operator"), filepath.Join(dir, "ca.crt")
	write(operator, "operator")
	write(filepath.Join(dir, "stepwise-copy"), "copy")
	write(ca, "certificates")
	write(filepath.Join(plugins, "stepwise-plugin-aws"), "aws")
	write(filepath.Join(plugins, "stepwise-plugin-vsphere"), "vsphere")
	write(filepath.Join(plugins, "SHA256SUMS"), "sums")
	return operator, plugins, ca
}

// assertBuilt asserts that run wrote to out, and printed, the image of s for arch named tag.
func assertBuilt(t *testing.T, s ociimage.Spec, arch, tag, out, printed string) {
	t.Helper()
	want := filepath.Join(t.TempDir(), "want.tar")
	digest, err := ociimage.WriteArchive(s, arch, tag, want)
	require.NoError(t, err)
	assert.Equal(t, out+" "+tag+" "+digest.String()+"\n", printed, "the archive, the tag and the image's digest")
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	wantData, err := os.ReadFile(want)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(wantData, got), "%s is the image ociimage builds", out)
}

func TestTheOperatorsImage(t *testing.T) {
	operator, plugins, ca := inputs(t)
	out := filepath.Join(t.TempDir(), "images", "operator.tar")
	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-operator", operator, "-plugins", plugins, "-ca-bundle", ca,
		"-tag", "registry.example/stepwise-operator:v1", "-o", out, "-arch", "arm64"}, &stdout))
	s, err := ociimage.OperatorSpec(operator, plugins, ca)
	require.NoError(t, err)
	assertBuilt(t, s, "arm64", "registry.example/stepwise-operator:v1", out, stdout.String())

	// stepwise-copy is looked for next to the operator's binary.
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(operator), "stepwise-copy")))
	err = run(t.Context(), []string{"-operator", operator, "-plugins", plugins, "-ca-bundle", ca,
		"-tag", "stepwise-operator:v1", "-o", filepath.Join(t.TempDir(), "operator.tar")}, io.Discard)
	assert.ErrorContains(t, err, filepath.Join(filepath.Dir(operator), "stepwise-copy"))
}

func TestAPluginsOwnImage(t *testing.T) {
	_, plugins, _ := inputs(t)
	binary := filepath.Join(plugins, "stepwise-plugin-aws")
	out := filepath.Join(t.TempDir(), "plugin.tar")
	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-plugin", binary, "-tag", "stepwise-plugin-aws:v1", "-o", out}, &stdout))
	assertBuilt(t, ociimage.PluginSpec(binary), runtime.GOARCH, "stepwise-plugin-aws:v1", out, stdout.String())
	assert.NoFileExists(t, binary+".sigstore.json", "signed only when asked")
}

// TestASignedPluginsOwnImage: with -signing-key the binary is signed first, and its image
// holds the signature next to it, which passes the author's key as the operator checks it.
func TestASignedPluginsOwnImage(t *testing.T) {
	_, plugins, _ := inputs(t)
	private, public, err := signature.Keygen()
	require.NoError(t, err)
	key := filepath.Join(t.TempDir(), "stepwise-signing.key")
	require.NoError(t, os.WriteFile(key, private, 0o600))
	binary := filepath.Join(plugins, "stepwise-plugin-aws")
	out := filepath.Join(t.TempDir(), "plugin.tar")
	var stdout bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-plugin", binary, "-signing-key", key,
		"-tag", "stepwise-plugin-aws:v1", "-o", out, "-arch", "amd64"}, &stdout))

	bundle, err := os.ReadFile(binary + ".sigstore.json")
	require.NoError(t, err, "the signature, next to the binary")
	verifier, err := signature.NewVerifier("")
	require.NoError(t, err)
	digest := sha256.Sum256([]byte("aws"))
	assert.NoError(t, verifier.Verify(signature.Policy{PublicKey: string(public)}, bundle, digest[:]))
	assertBuilt(t, ociimage.PluginSpec(binary), "amd64", "stepwise-plugin-aws:v1", out, stdout.String())

	assert.ErrorContains(t, run(t.Context(), []string{"-operator", "x", "-plugins", plugins, "-signing-key", key, "-tag", "t", "-o", out}, io.Discard),
		"-signing-key signs a plugin")
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-operator", "x", "-plugin", "y", "-tag", "t", "-o", "o"},
		{"-plugin", "y", "-o", "o"},
	} {
		assert.Error(t, run(t.Context(), args, io.Discard), "%v", args)
	}
}
