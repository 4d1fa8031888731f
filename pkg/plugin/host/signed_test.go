package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// TestSignedInstalledPlugins: an installed plugin with a signature policy runs only when
// the signature next to it, made in the test with the author's key, is over its very
// bytes and by that key; it runs from the copy that was verified, and nothing of a
// refused one runs (no process). Each mount layout of the chart is covered: the
// executables in the directory (an init container's copy) and each in a directory of its
// own (an image volume per plugin).
func TestSignedInstalledPlugins(t *testing.T) {
	const (
		test    = "stepwise-plugin-test"
		example = "stepwise-plugin-example"
	)
	authorPrivate, authorPublic, err := signature.Keygen()
	require.NoError(t, err)
	otherPrivate, _, err := signature.Keygen()
	require.NoError(t, err)
	read := func(built string) []byte {
		b, err := os.ReadFile(filepath.Join(binDir, built))
		require.NoError(t, err)
		return b
	}
	signWith := func(key []byte, built string) []byte {
		bundle, err := signature.Sign(t.Context(), read(built), key)
		require.NoError(t, err)
		return bundle
	}
	byAuthor := signature.Policy{PublicKey: string(authorPublic)}
	testExecutors := []string{"test.block", "test.echo", "test.environ", "test.fail", "test.hostile", "test.logs"}

	tests := []struct {
		name string
		// file is the executable's bytes (a built plugin), signature its signature's
		// bundle (nil: none), sums the checksum file's lines (name -> built plugin).
		file      string
		signature []byte
		sums      map[string]string
		policies  signature.Policies
		nested    bool
		want      []string
		// wantReason and wantRefused: the refusal of stepwise-plugin-test, its typed
		// reason and what its message says.
		wantReason  v1alpha1.PluginRefusalReason
		wantRefused []string
	}{
		{name: "signed by the author", file: test, signature: signWith(authorPrivate, test),
			policies: signature.Policies{"test": byAuthor}, want: testExecutors},
		{name: "signed by the author, in an image volume of its own", file: test, signature: signWith(authorPrivate, test),
			policies: signature.Policies{"test": byAuthor}, nested: true, want: testExecutors},
		{name: "signed by the author, and listed", file: test, signature: signWith(authorPrivate, test),
			sums: map[string]string{test: test}, policies: signature.Policies{"test": byAuthor}, want: testExecutors},
		{name: "signed by another key", file: test, signature: signWith(otherPrivate, test),
			policies: signature.Policies{"test": byAuthor}, wantReason: v1alpha1.PluginSignedByAnother, wantRefused: []string{"(SignedByAnother)", "not signed by the policy's public key"}},
		{name: "other bytes under the author's signature (the tag re-pushed)", file: example, signature: signWith(authorPrivate, test),
			policies: signature.Policies{"test": byAuthor}, wantReason: v1alpha1.PluginSignedOtherContent, wantRefused: []string{"(SignedOtherContent)", "the signature is over SHA2_256"}},
		{name: "unsigned", file: test,
			policies: signature.Policies{"test": byAuthor}, wantReason: v1alpha1.PluginUnsigned, wantRefused: []string{"(Unsigned)", "stepwise-plugin-test.sigstore.json is missing"}},
		{name: "signed, and listed with other bytes' checksum: both must pass", file: test, signature: signWith(authorPrivate, test),
			sums: map[string]string{test: example}, policies: signature.Policies{"test": byAuthor}, wantReason: v1alpha1.PluginChecksumMismatch, wantRefused: []string{"its SHA-256 is"}},
		{name: "neither listed nor given a policy, when others have one", file: test,
			policies: signature.Policies{"other": byAuthor}, wantReason: v1alpha1.PluginNotVerifiable, wantRefused: []string{"neither listed in the checksum file", "nor given a signature policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			verifier, err := signature.NewVerifier("")
			require.NoError(t, err)
			opts := Options{
				InstalledDir:       t.TempDir(),
				InstalledChecksums: filepath.Join(t.TempDir(), "SHA256SUMS"),
				InstalledPolicies:  tt.policies,
				Verifier:           verifier,
			}
			dir := opts.InstalledDir
			if tt.nested {
				dir = filepath.Join(dir, "test")
				require.NoError(t, os.Mkdir(dir, 0o755))
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, test), read(tt.file), 0o755))
			if tt.signature != nil {
				require.NoError(t, os.WriteFile(layout.SignaturePath(filepath.Join(dir, test)), tt.signature, 0o644))
			}
			var lines []string
			for name, built := range tt.sums {
				lines = append(lines, sumOf(t, built)+"  "+name)
			}
			require.NoError(t, os.WriteFile(opts.InstalledChecksums, []byte(strings.Join(lines, "\n")+"\n"), 0o644))

			h := New(klog.Background(), opts)
			t.Cleanup(h.Close)
			executors, refused, err := h.start(context.Background())
			require.NoError(t, err)
			var names []string
			for _, e := range executors {
				names = append(names, e.Name())
			}
			slices.Sort(names)
			assert.Equal(t, tt.want, names)
			if tt.wantRefused == nil {
				assert.Empty(t, refused)
				return
			}
			assert.Equal(t, tt.wantReason, refused[test].Reason)
			assert.Equal(t, test, refused[test].Plugin)
			for _, want := range tt.wantRefused {
				assert.Contains(t, refused[test].Message, want)
			}
			assert.Empty(t, h.PIDs(), "nothing of a refused plugin runs")
		})
	}
}
