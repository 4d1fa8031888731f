package delegatedauth

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/cert"
)

func TestServingCertificate(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("from-files", nil, nil)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))

	cases := []struct {
		name, certFile, keyFile string
		wantErr                 string
		wantSubject             string
	}{
		{name: "from files", certFile: certFile, keyFile: keyFile, wantSubject: "from-files"},
		{name: "self-signed when none is named", wantSubject: "stepwise-operator"},
		{name: "a certificate without its key", certFile: certFile, wantErr: "both"},
		{name: "a key without its certificate", keyFile: keyFile, wantErr: "both"},
		{name: "a file that is not there", certFile: filepath.Join(dir, "missing"), keyFile: keyFile, wantErr: "load the serving certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := ServingCertificate(tc.certFile, tc.keyFile, "stepwise-operator")
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			leaf, err := x509.ParseCertificate(pair.Certificate[0])
			require.NoError(t, err)
			assert.Contains(t, leaf.DNSNames, tc.wantSubject)
			assert.NotNil(t, TLSConfig(pair).Certificates)
		})
	}
}
