package delegatedauth

import (
	"crypto/tls"
	"errors"
	"fmt"

	"k8s.io/client-go/util/cert"
)

// ServingCertificate loads the certificate and key files when both are named; when neither
// is, it makes a self-signed one for host, held in memory only (a scraper then skips
// verification or pins it, as it does with a kubelet's). Naming one without the other is
// an error.
func ServingCertificate(certFile, keyFile, host string) (tls.Certificate, error) {
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("load the serving certificate %s and key %s: %w", certFile, keyFile, err)
		}
		return pair, nil
	case certFile != "" || keyFile != "":
		return tls.Certificate{}, errors.New("a serving certificate needs both its file and its key's")
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("make a self-signed serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read the self-signed serving certificate: %w", err)
	}
	return pair, nil
}

// TLSConfig serves pair with TLS 1.2 or later.
func TLSConfig(pair tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
}
