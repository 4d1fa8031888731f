package index

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

const (
	digestA = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	digestB = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

type keys struct{ private, public []byte }

func newKeys(t *testing.T) keys {
	t.Helper()
	private, public, err := signature.Keygen()
	require.NoError(t, err)
	return keys{private: private, public: public}
}

// sample is an index of two plugins, signed by plugins' key.
func sample(plugins keys) *Index {
	return &Index{APIVersion: APIVersion, Kind: Kind, Plugins: []Plugin{
		{Name: "vsphere", Description: "Terminates the VM behind a retired node", Image: "registry.example/stepwise-plugin-vsphere",
			Digest: digestA, Executors: []string{"vsphere.terminate-vm"}, Signature: signature.Policy{PublicKey: string(plugins.public)}},
		{Name: "aws", Description: "Terminates the EC2 instance behind a retired node", Image: "registry.example:5000/platform/stepwise-plugin-aws",
			Digest: digestB, Executors: []string{"aws.terminate-instance"},
			Signature: signature.Policy{Identity: "https://github.com/acme/plugins/.github/workflows/release.yml@refs/tags/v1.0.0", Issuer: "https://token.actions.githubusercontent.com"}},
	}}
}

// publish writes the index, and its signature unless bundle is nil, into dir as
// plugin-index.yaml; it returns the index's path.
func publish(t *testing.T, dir string, data, bundle []byte) string {
	t.Helper()
	path := filepath.Join(dir, "plugin-index.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	if bundle != nil {
		require.NoError(t, os.WriteFile(SignatureLocation(path), bundle, 0o644))
	}
	return path
}

func TestLoadChecksTheSignatureFirst(t *testing.T) {
	maintainer, other, plugins := newKeys(t), newKeys(t), newKeys(t)
	policy := signature.Policy{PublicKey: string(maintainer.public)}
	data, bundle, err := Write(t.Context(), sample(plugins), maintainer.private)
	require.NoError(t, err)
	_, otherBundle, err := Write(t.Context(), sample(plugins), other.private)
	require.NoError(t, err)
	// Another digest for vsphere, under the maintainer's earlier signature.
	tampered := []byte(strings.Replace(string(data), digestA, digestB, 1))
	require.NotEqual(t, data, tampered)
	// Not YAML at all, yet signed: refused for its content, after its signature passed.
	garbage := []byte("plugins: [")
	garbageBundle, err := signature.Sign(t.Context(), garbage, maintainer.private)
	require.NoError(t, err)

	tests := []struct {
		name         string
		data, bundle []byte
		wantReason   signature.Reason
		wantErr      string
	}{
		{name: "signed by the policy's key", data: data, bundle: bundle},
		{name: "signed by another key", data: data, bundle: otherBundle, wantReason: signature.ReasonSignedByAnother},
		{name: "changed after it was signed", data: tampered, bundle: bundle, wantReason: signature.ReasonSignedOtherContent},
		{name: "unsigned", data: data, wantReason: signature.ReasonUnsigned},
		{name: "a signature that is no bundle", data: data, bundle: []byte(`{}`), wantReason: signature.ReasonInvalidSignature},
		{name: "signed, but no index", data: garbage, bundle: garbageBundle, wantErr: "read the index"},
	}
	for _, tt := range tests {
		for _, source := range []string{"file", "http"} {
			t.Run(tt.name+" from a "+source, func(t *testing.T) {
				location := publish(t, t.TempDir(), tt.data, tt.bundle)
				if source == "http" {
					srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(location))))
					t.Cleanup(srv.Close)
					location = srv.URL + "/" + filepath.Base(location)
				}
				ix, err := Load(t.Context(), location, policy, nil)
				switch {
				case tt.wantReason != "":
					var refusal *signature.RefusedError
					require.ErrorAs(t, err, &refusal)
					assert.Equal(t, tt.wantReason, refusal.Reason, refusal.Detail)
					assert.ErrorContains(t, err, "the plugin index "+location)
				case tt.wantErr != "":
					assert.ErrorContains(t, err, tt.wantErr)
				default:
					require.NoError(t, err)
					assert.Equal(t, sample(plugins), ix)
				}
			})
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	maintainer := newKeys(t)
	policy := signature.Policy{PublicKey: string(maintainer.public)}
	data, bundle, err := Write(t.Context(), sample(newKeys(t)), maintainer.private)
	require.NoError(t, err)
	signed := publish(t, t.TempDir(), data, bundle)
	tooLarge := publish(t, t.TempDir(), make([]byte, MaxSize+1), bundle)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)

	tests := []struct {
		name       string
		location   string
		policy     signature.Policy
		wantErr    string
		wantReason signature.Reason
	}{
		{name: "a keyless policy without a trusted root", location: signed,
			policy:     signature.Policy{Identity: "maintainer@example.com", Issuer: "https://accounts.example"},
			wantReason: signature.ReasonNoTrustedRoot},
		{name: "no policy", location: signed, wantErr: "who must have signed the plugin index"},
		{name: "a missing index", location: filepath.Join(t.TempDir(), "missing.yaml"), policy: policy, wantErr: "no such file"},
		{name: "an index larger than the limit", location: tooLarge, policy: policy, wantErr: fmt.Sprintf("larger than %d bytes", MaxSize)},
		{name: "a server that fails", location: srv.URL + "/index.yaml", policy: policy, wantErr: "503 Service Unavailable"},
		{name: "another scheme", location: "ftp://mirror.example/index.yaml", policy: policy, wantErr: "a file, or an http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(t.Context(), tt.location, tt.policy, nil)
			if tt.wantReason != "" {
				var refusal *signature.RefusedError
				require.ErrorAs(t, err, &refusal)
				assert.Equal(t, tt.wantReason, refusal.Reason, refusal.Detail)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestSignatureLocation(t *testing.T) {
	assert.Equal(t, "/srv/plugin-index.yaml.sigstore.json", SignatureLocation("/srv/plugin-index.yaml"))
	assert.Equal(t, "https://mirror.example/stepwise/plugin-index.yaml.sigstore.json?v=1",
		SignatureLocation("https://mirror.example/stepwise/plugin-index.yaml?v=1"))
}

func TestParseRefusesMalformedEntries(t *testing.T) {
	public := newKeys(t).public
	key := "signature: {publicKey: " + fmt.Sprintf("%q", public) + "}"
	entry := func(fields string) string {
		return "apiVersion: stepwise.dev/v1alpha1\nkind: PluginIndex\nplugins:\n- " + fields + "\n"
	}
	good := "{name: example, image: registry.example/stepwise-plugin-example, digest: " + digestA + ", " + key + "}"
	tests := []struct {
		name, index string
		wantErr     string // "": parses
	}{
		{name: "a good entry", index: entry(good)},
		{name: "YAML as JSON", index: `{"apiVersion":"stepwise.dev/v1alpha1","kind":"PluginIndex","plugins":[]}`},
		{name: "another kind", index: "apiVersion: v1\nkind: ConfigMap\n", wantErr: `apiVersion "v1", kind "ConfigMap": not a stepwise.dev/v1alpha1 PluginIndex`},
		{name: "an unknown field", index: entry(strings.Replace(good, "digest:", "digset:", 1)), wantErr: `unknown field "digset"`},
		{name: "an upper-case name", index: entry(strings.Replace(good, "name: example", "name: Example", 1)),
			wantErr: `plugins[0] (Example): name "Example": not a lower-case DNS label of at most 40 characters`},
		{name: "a name too long for the chart", index: entry(strings.Replace(good, "name: example", "name: "+strings.Repeat("a", 41), 1)),
			wantErr: "not a lower-case DNS label"},
		{name: "a name with a slash", index: entry(strings.Replace(good, "name: example", "name: ../etc", 1)), wantErr: "not a lower-case DNS label"},
		{name: "the same name twice", index: entry(good) + "- " + good + "\n", wantErr: `plugins[1]: a second plugin named "example"`},
		{name: "a short digest", index: entry(strings.Replace(good, digestA, "sha256:0123", 1)),
			wantErr: `digest "sha256:0123": not sha256: and 64 lower-case hex digits`},
		{name: "a digest without its algorithm", index: entry(strings.Replace(good, digestA, digestA[7:], 1)), wantErr: "not sha256: and 64"},
		{name: "an image with a tag", index: entry(strings.Replace(good, "stepwise-plugin-example,", "stepwise-plugin-example:v1,", 1)),
			wantErr: `image "registry.example/stepwise-plugin-example:v1": not an image's repository without tag or digest`},
		{name: "an image with a digest", index: entry(strings.Replace(good, "stepwise-plugin-example,", "stepwise-plugin-example@"+digestA+",", 1)),
			wantErr: "without tag or digest"},
		{name: "no signature", index: entry("{name: example, image: registry.example/stepwise-plugin-example, digest: " + digestA + "}"),
			wantErr: "signature: a public key, or an identity and its issuer"},
		{name: "a key and an identity", index: entry(strings.Replace(good, "publicKey:", "identity: a@example.com, issuer: https://accounts.example, publicKey:", 1)),
			wantErr: "signature: a public key, or an identity and its issuer, not both"},
		{name: "an issuer over http", index: entry(strings.Replace(good, key, "signature: {identity: a@example.com, issuer: http://accounts.example}", 1)),
			wantErr: `issuer "http://accounts.example" is not an https URL`},
		{name: "a terminal escape in an identity", index: entry(strings.Replace(good, key, `signature: {identity: "a\e]8;;@example.com", issuer: https://accounts.example}`, 1)),
			wantErr: "signature: an identity and an issuer of printable characters"},
		{name: "a terminal escape in a description", index: entry(strings.Replace(good, "{name:", `{description: "\e[2Jgone", name:`, 1)),
			wantErr: "description: one line of at most"},
		{name: "an executor with a space", index: entry(strings.Replace(good, "{name:", `{executors: ["a b"], name:`, 1)), wantErr: `executor "a b"`},
		{name: "not YAML", index: "plugins: [", wantErr: "read the index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.index))
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}

	t.Run("too many plugins", func(t *testing.T) {
		ix := &Index{APIVersion: APIVersion, Kind: Kind}
		for i := range MaxPlugins + 1 {
			ix.Plugins = append(ix.Plugins, Plugin{Name: fmt.Sprintf("p%d", i), Image: "stepwise-plugin-p", Digest: digestA,
				Signature: signature.Policy{PublicKey: string(public)}})
		}
		assert.ErrorContains(t, ix.Validate(), "1001 plugins: an index holds at most 1000")
		ix.Plugins = ix.Plugins[:MaxPlugins]
		assert.NoError(t, ix.Validate())
	})
}

func TestMarshalWritesWhatParseReads(t *testing.T) {
	ix := sample(newKeys(t))
	data, err := Marshal(ix)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(data), "apiVersion: stepwise.dev/v1alpha1\nkind: PluginIndex\nplugins:\n"), string(data))
	assert.Contains(t, string(data), "publicKey: |\n", "a PEM key is written as a block")
	back, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, ix, back)

	ix.Plugins[1].Name = ix.Plugins[0].Name
	_, err = Marshal(ix)
	assert.ErrorContains(t, err, "a second plugin named")
}

func TestFindAndSearch(t *testing.T) {
	ix := sample(newKeys(t))
	p, ok := ix.Find("aws")
	assert.True(t, ok)
	assert.Equal(t, digestB, p.Digest)
	_, ok = ix.Find("gcp")
	assert.False(t, ok)

	names := func(ps []Plugin) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	tests := []struct {
		term string
		want []string
	}{
		{term: "", want: []string{"aws", "vsphere"}},
		{term: "retired NODE", want: []string{"aws", "vsphere"}},
		{term: "vsph", want: []string{"vsphere"}},
		{term: "terminate-instance", want: []string{"aws"}},
		{term: "EC2", want: []string{"aws"}},
		{term: "gcp"},
	}
	for _, tt := range tests {
		t.Run(tt.term, func(t *testing.T) {
			assert.Equal(t, tt.want, names(ix.Search(tt.term)))
		})
	}
}
