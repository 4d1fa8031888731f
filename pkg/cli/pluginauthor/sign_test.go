package pluginauthor_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSignAPluginAsTheOperatorChecksIt: an author makes a key pair, signs a binary and
// checks it as the operator will; a binary changed after it was signed, or checked against
// another key, does not pass, saying why.
func TestSignAPluginAsTheOperatorChecksIt(t *testing.T) {
	keys, otherKeys := t.TempDir(), t.TempDir()
	code, out, errOut := runPlugin(t, "keygen", "--dir", keys)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "stepwise-signing.key (secret)")
	info, err := os.Stat(filepath.Join(keys, "stepwise-signing.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the private key is the author's alone")
	code, _, errOut = runPlugin(t, "keygen", "--dir", otherKeys)
	require.Equal(t, 0, code, errOut)

	code, _, errOut = runPlugin(t, "keygen", "--dir", keys)
	assert.NotEqual(t, 0, code, "a key pair is never overwritten")
	assert.Contains(t, errOut, "file exists")

	binary := filepath.Join(t.TempDir(), "stepwise-plugin-acme")
	require.NoError(t, os.WriteFile(binary, []byte("\x7fELF acme"), 0o755))
	code, out, errOut = runPlugin(t, "sign", binary, "--key", filepath.Join(keys, "stepwise-signing.key"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "signed "+binary)
	assert.FileExists(t, binary+".sigstore.json")

	code, out, errOut = runPlugin(t, "verify", binary, "--key", filepath.Join(keys, "stepwise-signing.pub"))
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "signed by")

	code, _, errOut = runPlugin(t, "verify", binary, "--key", filepath.Join(otherKeys, "stepwise-signing.pub"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "SignedByAnother")

	require.NoError(t, os.WriteFile(binary, []byte("\x7fELF acme, changed"), 0o755))
	code, _, errOut = runPlugin(t, "verify", binary, "--key", filepath.Join(keys, "stepwise-signing.pub"))
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "SignedOtherContent")
}
