package signature

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// Keygen makes an ECDSA P-256 key pair for signing plugins: the private key as PKCS #8
// PEM (keep it secret), the public key as PEM (what a policy names).
func Keygen() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make a key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the private key: %w", err)
	}
	publicPEM, err = cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encode the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), publicPEM, nil
}

// Sign signs content (a plugin's executable) with the ECDSA P-256 private key in PEM
// (PKCS #8 or SEC 1) and returns the Sigstore bundle, JSON, that VerifyFile reads next to
// the executable: what `cosign sign-blob --key --bundle --new-bundle-format
// --tlog-upload=false` makes, and `cosign verify-blob --key --bundle
// --insecure-ignore-tlog` accepts.
func Sign(ctx context.Context, content, privatePEM []byte) ([]byte, error) {
	key, err := parseSigningKey(privatePEM)
	if err != nil {
		return nil, err
	}
	pb, err := sign.Bundle(&sign.PlainData{Data: content}, &keypair{key: key}, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	data, err := protojson.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("encode the signature's bundle: %w", err)
	}
	return data, nil
}

func parseSigningKey(privatePEM []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(privatePEM)
	if block == nil {
		return nil, errors.New("the signing key is not PEM")
	}
	var parsed any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		parsed, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		parsed, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("the signing key is a %q, not an unencrypted PRIVATE KEY or EC PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("read the signing key: %w", err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, errors.New("the signing key is not an ECDSA P-256 key")
	}
	return key, nil
}

// keypair is sigstore-go's signing key made of a key the author keeps (its
// EphemeralKeypair makes a new one each time).
type keypair struct{ key *ecdsa.PrivateKey }

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

// GetHint is the key's fingerprint, as cosign's: the base64 SHA-256 of its DER.
func (k *keypair) GetHint() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

func (k *keypair) GetKeyAlgorithm() string { return "ECDSA" }

func (k *keypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }

func (k *keypair) GetPublicKeyPem() (string, error) {
	data, err := cryptoutils.MarshalPublicKeyToPEM(k.key.Public())
	return string(data), err
}

// SignData signs the SHA-256 of data and returns the signature and that digest.
func (k *keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, sum[:])
	if err != nil {
		return nil, nil, err
	}
	return sig, sum[:], nil
}
