package pluginauthor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const (
	vsphereDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	awsDigest     = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// chartPlugin is what the chart reads of a plugins[] entry.
type chartPlugin struct {
	Name      string `json:"name"`
	Image     string `json:"image"`
	Signature struct {
		PublicKey string `json:"publicKey"`
		Identity  string `json:"identity"`
		Issuer    string `json:"issuer"`
	} `json:"signature"`
	SHA256 string `json:"sha256"`
}

type chartValues struct {
	Plugins  []chartPlugin `json:"plugins"`
	Replicas int           `json:"replicas"`
}

// writeIndex writes a plugin index of two plugins, vsphere signed by pluginKey and aws
// keyless, as a maintainer writes it by hand.
func writeIndex(t *testing.T, pluginKey []byte) string {
	t.Helper()
	indented := "        " + strings.ReplaceAll(strings.TrimSpace(string(pluginKey)), "\n", "\n        ")
	text := `apiVersion: stepwise.dev/v1alpha1
kind: PluginIndex
plugins:
- name: vsphere
  description: Terminates the VM behind a retired node
  image: registry.example/stepwise-plugin-vsphere
  digest: ` + vsphereDigest + `
  executors: [vsphere.terminate-vm]
  signature:
    publicKey: |
` + indented + `
- name: aws
  description: Terminates the EC2 instance behind a retired node
  image: registry.example/stepwise-plugin-aws
  digest: ` + awsDigest + `
  executors: [aws.terminate-instance]
  signature:
    identity: https://github.com/acme/plugins/.github/workflows/release.yml@refs/tags/v1.0.0
    issuer: https://token.actions.githubusercontent.com
`
	path := filepath.Join(t.TempDir(), "plugin-index.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// TestInstallAPluginByName: a maintainer signs an index; an installer searches it and
// writes the chart's values of a plugin from it, checked against the maintainer's key; an
// index changed after it was signed, or checked against another key, is refused.
func TestInstallAPluginByName(t *testing.T) {
	maintainer, author, other := t.TempDir(), t.TempDir(), t.TempDir()
	for _, dir := range []string{maintainer, author, other} {
		code, _, errOut := runPlugin(t, "keygen", "--dir", dir)
		require.Equal(t, 0, code, errOut)
	}
	maintainerKey, maintainerPub := filepath.Join(maintainer, "stepwise-signing.key"), filepath.Join(maintainer, "stepwise-signing.pub")
	pluginKey, err := os.ReadFile(filepath.Join(author, "stepwise-signing.pub"))
	require.NoError(t, err)
	indexPath := writeIndex(t, pluginKey)

	code, out, errOut := runPlugin(t, "index", "sign", indexPath, "--key", maintainerKey)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "signed "+indexPath+" (2 plugins")
	assert.FileExists(t, indexPath+".sigstore.json")

	t.Run("search", func(t *testing.T) {
		code, out, errOut := runPlugin(t, "search", "--index", indexPath, "--index-key", maintainerPub)
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		assert.Regexp(t, `^NAME\s+DIGEST\s+SIGNER\s+DESCRIPTION$`, lines[0])
		assert.Regexp(t, `^aws\s+sha256:fedcba987654\s+https://github.com/acme/plugins/\S+\s+Terminates the EC2 instance`, lines[1])
		assert.Regexp(t, `^vsphere\s+sha256:0123456789ab\s+key sha256:[0-9a-f]{12}\s+Terminates the VM`, lines[2])

		code, out, errOut = runPlugin(t, "search", "VSPHERE.terminate", "--index", indexPath, "--index-key", maintainerPub)
		require.Equal(t, 0, code, errOut)
		assert.NotContains(t, out, "aws")
		assert.Contains(t, out, "vsphere")

		code, out, errOut = runPlugin(t, "search", "gcp", "--index", indexPath, "--index-key", maintainerPub)
		require.Equal(t, 0, code, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, `No plugins in `+indexPath+` match "gcp"`)
	})

	t.Run("install prints the values", func(t *testing.T) {
		code, out, errOut := runPlugin(t, "install", "vsphere", "--index", indexPath, "--index-key", maintainerPub)
		require.Equal(t, 0, code, errOut)
		var values chartValues
		require.NoError(t, yaml.UnmarshalStrict([]byte(out), &values), out)
		require.Len(t, values.Plugins, 1)
		assert.Equal(t, "vsphere", values.Plugins[0].Name)
		assert.Equal(t, "registry.example/stepwise-plugin-vsphere@"+vsphereDigest, values.Plugins[0].Image)
		assert.Equal(t, string(pluginKey), values.Plugins[0].Signature.PublicKey)
	})

	t.Run("install into a values file", func(t *testing.T) {
		valuesFile := filepath.Join(t.TempDir(), "my-values.yaml")
		require.NoError(t, os.WriteFile(valuesFile, []byte(`# our cluster
replicas: 3

plugins:
- name: vsphere   # an older build
  image: registry.example/stepwise-plugin-vsphere@`+awsDigest+`
  sha256: `+awsDigest[len("sha256:"):]+`
- name: example
  image: registry.example/stepwise-plugin-example@`+awsDigest+`
  sha256: `+awsDigest[len("sha256:"):]+`
`), 0o600))
		code, out, errOut := runPlugin(t, "install", "vsphere", "--index", indexPath, "--index-key", maintainerPub, "--values", valuesFile)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "replaced plugin vsphere in "+valuesFile+": image registry.example/stepwise-plugin-vsphere@"+vsphereDigest)
		assert.Contains(t, out, "helm upgrade --install stepwise charts/stepwise -n stepwise-system -f "+valuesFile)

		code, out, errOut = runPlugin(t, "install", "aws", "--index", indexPath, "--index-key", maintainerPub, "--values", valuesFile)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "added plugin aws to "+valuesFile)
		assert.Contains(t, out, "pluginTrustedRoot", "a keyless policy needs the chart's trusted root")

		data, err := os.ReadFile(valuesFile)
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(data), "# our cluster\nreplicas: 3\n\nplugins:\n"), string(data))
		var values chartValues
		require.NoError(t, yaml.Unmarshal(data, &values))
		assert.Equal(t, 3, values.Replicas)
		require.Len(t, values.Plugins, 3)
		assert.Equal(t, "registry.example/stepwise-plugin-vsphere@"+vsphereDigest, values.Plugins[0].Image)
		assert.Equal(t, string(pluginKey), values.Plugins[0].Signature.PublicKey)
		assert.Empty(t, values.Plugins[0].SHA256, "the older build's sha256 is gone with its entry")
		assert.Equal(t, "example", values.Plugins[1].Name)
		assert.NotEmpty(t, values.Plugins[1].SHA256, "another plugin is kept as it was")
		assert.Equal(t, "https://token.actions.githubusercontent.com", values.Plugins[2].Signature.Issuer)
		info, err := os.Stat(valuesFile)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the file keeps its mode")
	})

	t.Run("install into a new values file, the index from the environment", func(t *testing.T) {
		t.Setenv("STEPWISE_PLUGIN_INDEX", indexPath)
		t.Setenv("STEPWISE_PLUGIN_INDEX_KEY", maintainerPub)
		valuesFile := filepath.Join(t.TempDir(), "values.yaml")
		code, out, errOut := runPlugin(t, "install", "vsphere", "--values", valuesFile)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "added plugin vsphere")
		var values chartValues
		data, err := os.ReadFile(valuesFile)
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(data, &values))
		assert.Len(t, values.Plugins, 1)
	})

	t.Run("refusals", func(t *testing.T) {
		tampered := filepath.Join(t.TempDir(), "plugin-index.yaml")
		data, err := os.ReadFile(indexPath)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(tampered, []byte(strings.Replace(string(data), vsphereDigest, awsDigest, 1)), 0o644))
		bundle, err := os.ReadFile(indexPath + ".sigstore.json")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(tampered+".sigstore.json", bundle, 0o644))
		unsigned := filepath.Join(t.TempDir(), "plugin-index.yaml")
		require.NoError(t, os.WriteFile(unsigned, data, 0o644))
		otherPub := filepath.Join(other, "stepwise-signing.pub")

		tests := []struct {
			name    string
			args    []string
			wantErr string
		}{
			{name: "changed after it was signed", args: []string{"install", "vsphere", "--index", tampered, "--index-key", maintainerPub}, wantErr: "SignedOtherContent"},
			{name: "checked against another key", args: []string{"search", "--index", indexPath, "--index-key", otherPub}, wantErr: "SignedByAnother"},
			{name: "unsigned", args: []string{"search", "--index", unsigned, "--index-key", maintainerPub}, wantErr: "Unsigned"},
			{name: "a plugin not in the index", args: []string{"install", "gcp", "--index", indexPath, "--index-key", maintainerPub},
				wantErr: `no plugin "gcp" in the index`},
			{name: "no index", args: []string{"search", "--index-key", maintainerPub}, wantErr: "no plugin index: give --index URL|FILE, or set STEPWISE_PLUGIN_INDEX"},
			{name: "no key", args: []string{"search", "--index", indexPath}, wantErr: "who must have signed the plugin index: give --index-key"},
			{name: "a key and an identity", args: []string{"search", "--index", indexPath, "--index-key", maintainerPub, "--index-identity", "a@example.com", "--index-issuer", "https://accounts.example"},
				wantErr: "not both"},
			{name: "a keyless index without a trusted root", args: []string{"search", "--index", indexPath, "--index-identity", "a@example.com", "--index-issuer", "https://accounts.example"},
				wantErr: "NoTrustedRoot"},
			{name: "signing an index that is malformed", args: []string{"index", "sign", writeBadIndex(t), "--key", maintainerKey}, wantErr: `digest "sha256:0123"`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				code, out, errOut := runPlugin(t, tt.args...)
				assert.NotEqual(t, 0, code, out)
				assert.Contains(t, errOut, tt.wantErr)
			})
		}
	})
}

func writeBadIndex(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "plugin-index.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: stepwise.dev/v1alpha1
kind: PluginIndex
plugins:
- {name: example, image: stepwise-plugin-example, digest: "sha256:0123", signature: {identity: a@example.com, issuer: https://accounts.example}}
`), 0o644))
	return path
}
