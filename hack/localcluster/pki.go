package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths (and the admin token) of the credentials `up` generates.
type pki struct {
	caCert     string // CA that signed the serving cert; goes into the kubeconfig
	serverCert string
	serverKey  string
	saKey      string // RSA key that signs and verifies service-account tokens
	tokenFile  string // --token-auth-file
	adminToken string
	// The node's kubelet: a client certificate of system:node:NAME in system:nodes, which
	// the Node authorizer and NodeRestriction know.
	kubeletCert string
	kubeletKey  string
	// The API server's client certificate to the kubelet (logs, exec, port-forward):
	// system:masters, which the kubelet's webhook authorization allows.
	apiserverKubeletCert string
	apiserverKubeletKey  string
	// The aggregation layer: the CA of the front proxy's client certificate (its own, not
	// caCert: a client of caCert must not be able to assert users in headers), and that
	// certificate, which the API server presents to aggregated API servers.
	frontProxyCA   string
	frontProxyCert string
	frontProxyKey  string
}

// frontProxyClientName is the front proxy's client certificate's name, the one name
// aggregated API servers accept it under (--requestheader-allowed-names).
const frontProxyClientName = "front-proxy-client"

// generatePKI writes a fresh CA, an API-server serving cert for loopback, a
// service-account signing key and a static token file into dir.
//
// We sign our own serving cert rather than letting kube-apiserver self-sign
// via --cert-dir so that the kubeconfig can verify the server properly with a
// CA we know up front (no insecure-skip-tls-verify).
func generatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{
		caCert:      filepath.Join(dir, "ca.crt"),
		serverCert:  filepath.Join(dir, "apiserver.crt"),
		serverKey:   filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		tokenFile:   filepath.Join(dir, "tokens.csv"),
		kubeletCert: filepath.Join(dir, "kubelet-client.crt"),
		kubeletKey:  filepath.Join(dir, "kubelet-client.key"),

		apiserverKubeletCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		apiserverKubeletKey:  filepath.Join(dir, "apiserver-kubelet-client.key"),

		frontProxyCA:   filepath.Join(dir, "front-proxy-ca.crt"),
		frontProxyCert: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyKey:  filepath.Join(dir, "front-proxy-client.key"),
	}

	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localcluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign CA cert: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA cert: %w", err)
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		// 10.96.0.1 is the `kubernetes` Service IP of --service-cluster-ip-range.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign serving cert: %w", err)
	}

	kubeletKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the kubelet's key: %w", err)
	}
	kubeletDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &kubeletKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign the kubelet's cert: %w", err)
	}
	kubeletKeyDER, err := x509.MarshalECPrivateKey(kubeletKey)
	if err != nil {
		return nil, fmt.Errorf("marshal the kubelet's key: %w", err)
	}

	toKubeletKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the API server's kubelet client key: %w", err)
	}
	toKubeletDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(4),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &toKubeletKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign the API server's kubelet client cert: %w", err)
	}
	toKubeletKeyDER, err := x509.MarshalECPrivateKey(toKubeletKey)
	if err != nil {
		return nil, fmt.Errorf("marshal the API server's kubelet client key: %w", err)
	}

	proxyCADER, proxyCertDER, proxyKeyDER, err := frontProxyPKI(now)
	if err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}

	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return nil, fmt.Errorf("generate admin token: %w", err)
	}
	p.adminToken = hex.EncodeToString(token)

	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, fmt.Errorf("marshal serving key: %w", err)
	}
	files := []struct {
		path string
		data []byte
	}{
		{p.caCert, pemBlock("CERTIFICATE", caDER)},
		{p.serverCert, pemBlock("CERTIFICATE", srvDER)},
		{p.serverKey, pemBlock("EC PRIVATE KEY", srvKeyDER)},
		{p.kubeletCert, pemBlock("CERTIFICATE", kubeletDER)},
		{p.kubeletKey, pemBlock("EC PRIVATE KEY", kubeletKeyDER)},
		{p.apiserverKubeletCert, pemBlock("CERTIFICATE", toKubeletDER)},
		{p.apiserverKubeletKey, pemBlock("EC PRIVATE KEY", toKubeletKeyDER)},
		{p.frontProxyCA, pemBlock("CERTIFICATE", proxyCADER)},
		{p.frontProxyCert, pemBlock("CERTIFICATE", proxyCertDER)},
		{p.frontProxyKey, pemBlock("EC PRIVATE KEY", proxyKeyDER)},
		{p.saKey, pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))},
		// token,user,uid,"groups": system:masters bypasses RBAC entirely.
		{p.tokenFile, fmt.Appendf(nil, "%s,admin,admin,\"system:masters\"\n", p.adminToken)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return p, nil
}

// frontProxyPKI makes the aggregation layer's CA and the front proxy's client certificate
// it signs (DER), and that certificate's key.
func frontProxyPKI(now time.Time) (caDER, certDER, keyDER []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate the front proxy's CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localcluster-front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if caDER, err = x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey); err != nil {
		return nil, nil, nil, fmt.Errorf("sign the front proxy's CA cert: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse the front proxy's CA cert: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate the front proxy's client key: %w", err)
	}
	if certDER, err = x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: frontProxyClientName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey); err != nil {
		return nil, nil, nil, fmt.Errorf("sign the front proxy's client cert: %w", err)
	}
	if keyDER, err = x509.MarshalECPrivateKey(key); err != nil {
		return nil, nil, nil, fmt.Errorf("marshal the front proxy's client key: %w", err)
	}
	return caDER, certDER, keyDER, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
