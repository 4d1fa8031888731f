package signature

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// pluginBytes stand for a plugin's executable.
var pluginBytes = []byte("\x7fELF the plugin's code")

// keys is an author's key pair, made in the test.
type keys struct{ private, public []byte }

func newKeys(t *testing.T) keys {
	t.Helper()
	private, public, err := Keygen()
	require.NoError(t, err)
	return keys{private: private, public: public}
}

func signed(t *testing.T, k keys, content []byte) []byte {
	t.Helper()
	bundleJSON, err := Sign(t.Context(), content, k.private)
	require.NoError(t, err)
	return bundleJSON
}

func digestOf(content []byte) []byte {
	sum := sha256.Sum256(content)
	return sum[:]
}

func TestVerifyAKeySignedPlugin(t *testing.T) {
	author, other := newKeys(t), newKeys(t)
	policy := Policy{PublicKey: string(author.public)}
	reswapped := append([]byte(nil), pluginBytes...)
	reswapped[len(reswapped)-1] = '!'
	tests := []struct {
		name       string
		bundleJSON []byte
		content    []byte
		want       Reason // "": passes
	}{
		{name: "signed by the policy's key", bundleJSON: signed(t, author, pluginBytes), content: pluginBytes},
		{name: "signed by another key", bundleJSON: signed(t, other, pluginBytes), content: pluginBytes, want: ReasonSignedByAnother},
		{name: "other bytes under the author's earlier signature (a re-pushed tag)", bundleJSON: signed(t, author, pluginBytes),
			content: reswapped, want: ReasonSignedOtherContent},
		{name: "other bytes signed by another key", bundleJSON: signed(t, other, reswapped), content: reswapped, want: ReasonSignedByAnother},
		{name: "not a bundle", bundleJSON: []byte(`{"mediaType":"text/plain"}`), content: pluginBytes, want: ReasonInvalidSignature},
		{name: "not JSON", bundleJSON: []byte("MEUCIQD signature"), content: pluginBytes, want: ReasonInvalidSignature},
	}
	v, err := NewVerifier("")
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Verify(policy, tt.bundleJSON, digestOf(tt.content))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var refusal *RefusedError
			require.ErrorAs(t, err, &refusal)
			assert.Equal(t, tt.want, refusal.Reason, refusal.Detail)
		})
	}
}

func TestVerifyFileNeedsTheSignatureNextToThePlugin(t *testing.T) {
	author := newKeys(t)
	dir := t.TempDir()
	executable := filepath.Join(dir, "stepwise-plugin-example")
	require.NoError(t, os.WriteFile(executable, pluginBytes, 0o755))
	v, err := NewVerifier("")
	require.NoError(t, err)
	policy := Policy{PublicKey: string(author.public)}

	err = v.VerifyFile(policy, executable, digestOf(pluginBytes))
	var refusal *RefusedError
	require.ErrorAs(t, err, &refusal)
	assert.Equal(t, ReasonUnsigned, refusal.Reason)
	assert.Contains(t, refusal.Detail, "stepwise-plugin-example.sigstore.json is missing")

	require.NoError(t, os.WriteFile(layout.SignaturePath(executable), signed(t, author, pluginBytes), 0o644))
	assert.NoError(t, v.VerifyFile(policy, executable, digestOf(pluginBytes)))
}

// TestVerifyAKeylessSignedPlugin: a certificate of a CA, logged in a transparency log,
// naming the identity and issuer, as Fulcio and Rekor make them; here a virtual Sigstore
// made in the test stands for the trusted root (nothing reaches the internet).
func TestVerifyAKeylessSignedPlugin(t *testing.T) {
	sigstore, err := ca.NewVirtualSigstore()
	require.NoError(t, err)
	const identity, issuer = "https://github.com/acme/stepwise-plugin-example/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	policy := Policy{Identity: identity, Issuer: issuer}
	// The virtual Sigstore's certificates carry no signed certificate timestamps.
	v := &Verifier{trusted: sigstore}
	tests := []struct {
		name             string
		identity, issuer string
		want             Reason
	}{
		{name: "signed by the identity", identity: identity, issuer: issuer},
		{name: "signed by another workflow", identity: "https://github.com/mallory/fork/.github/workflows/release.yml@refs/heads/main", issuer: issuer, want: ReasonSignedByAnother},
		{name: "the identity, vouched for by another issuer", identity: identity, issuer: "https://accounts.example", want: ReasonSignedByAnother},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entity, err := sigstore.Sign(tt.identity, tt.issuer, pluginBytes)
			require.NoError(t, err)
			err = v.verifyEntity(policy, entity, digestOf(pluginBytes))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var refusal *RefusedError
			require.ErrorAs(t, err, &refusal)
			assert.Equal(t, tt.want, refusal.Reason, refusal.Detail)
		})
	}

	t.Run("a keyless policy without a trusted root", func(t *testing.T) {
		entity, err := sigstore.Sign(identity, issuer, pluginBytes)
		require.NoError(t, err)
		err = (&Verifier{}).verifyEntity(policy, entity, digestOf(pluginBytes))
		var refusal *RefusedError
		require.ErrorAs(t, err, &refusal)
		assert.Equal(t, ReasonNoTrustedRoot, refusal.Reason)
	})
	t.Run("a key policy does not take a keyless signature", func(t *testing.T) {
		entity, err := sigstore.Sign(identity, issuer, pluginBytes)
		require.NoError(t, err)
		err = v.verifyEntity(Policy{PublicKey: string(newKeys(t).public)}, entity, digestOf(pluginBytes))
		var refusal *RefusedError
		require.ErrorAs(t, err, &refusal)
		assert.Equal(t, ReasonSignedByAnother, refusal.Reason)
	})
}

func TestPolicies(t *testing.T) {
	public := string(newKeys(t).public)
	tests := []struct {
		name    string
		json    string
		wantErr string
	}{
		{name: "a key and an identity", json: `{"example":{"publicKey":` + quote(public) + `},"vsphere":{"identity":"a@example.com","issuer":"https://accounts.example"}}`},
		{name: "none", json: `{}`},
		{name: "both", json: `{"example":{"publicKey":` + quote(public) + `,"identity":"a@example.com","issuer":"https://accounts.example"}}`, wantErr: "not both"},
		{name: "an identity without its issuer", json: `{"example":{"identity":"a@example.com"}}`, wantErr: "an identity and its issuer"},
		{name: "nothing", json: `{"example":{}}`, wantErr: "a public key, or an identity and its issuer"},
		{name: "not a key", json: `{"example":{"publicKey":"ssh-ed25519 AAAA"}}`, wantErr: "not a PEM public key"},
		{name: "not a plugin's name", json: `{"../etc":{"identity":"a","issuer":"b"}}`, wantErr: "not a plugin's name"},
		{name: "not JSON", json: `example: {}`, wantErr: "read the plugins' signature policies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policies.json")
			require.NoError(t, os.WriteFile(path, []byte(tt.json), 0o644))
			_, err := LoadPolicies(path)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
