package signature

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	sigsig "github.com/sigstore/sigstore/pkg/signature"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
)

// Reason is why a plugin's signature was refused: one of the API's plugin refusal
// reasons, which the catalogue and the steps waiting on the plugin publish.
type Reason = v1alpha1.PluginRefusalReason

const (
	ReasonUnsigned           = v1alpha1.PluginUnsigned
	ReasonInvalidSignature   = v1alpha1.PluginInvalidSignature
	ReasonSignedOtherContent = v1alpha1.PluginSignedOtherContent
	ReasonSignedByAnother    = v1alpha1.PluginSignedByAnother
	ReasonNoTrustedRoot      = v1alpha1.PluginNoTrustedRoot
)

// RefusedError is a plugin that did not pass its policy, and why.
type RefusedError struct {
	Reason Reason
	// Detail says what did not match, for a person.
	Detail string
}

func (e *RefusedError) Error() string {
	return "its signature is refused (" + string(e.Reason) + "): " + e.Detail
}

func refused(reason Reason, format string, args ...any) *RefusedError {
	return &RefusedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Verifier checks plugins' signatures against their policies.
type Verifier struct {
	// trusted is the trusted root of keyless signatures: the CAs, transparency logs and
	// timestamp authorities; nil when none was given.
	trusted root.TrustedMaterial
	// certificateTimestamps is how many signed certificate timestamps of the root's CT
	// logs a keyless signature's certificate needs: 1 when the root has CT logs.
	certificateTimestamps int
}

// NewVerifier reads the trusted root (a trusted_root.json, as Sigstore's TUF repository
// or a private deployment publishes it, copied for air-gapped clusters) that keyless
// policies are checked against; an empty path: keyless policies are refused.
func NewVerifier(trustedRootPath string) (*Verifier, error) {
	if trustedRootPath == "" {
		return &Verifier{}, nil
	}
	trusted, err := root.NewTrustedRootFromPath(trustedRootPath)
	if err != nil {
		return nil, fmt.Errorf("read the trusted root %s: %w", trustedRootPath, err)
	}
	v := &Verifier{trusted: trusted}
	if len(trusted.CTLogs()) > 0 {
		v.certificateTimestamps = 1
	}
	return v, nil
}

// VerifyFile checks the signature next to executable (layout.SignaturePath), whose bytes have the
// SHA-256 digest, against policy. A *RefusedError says why it does not pass.
func (v *Verifier) VerifyFile(policy Policy, executable string, digest []byte) error {
	data, err := os.ReadFile(layout.SignaturePath(executable))
	if errors.Is(err, os.ErrNotExist) {
		return refused(ReasonUnsigned, "no signature: %s is missing", layout.SignaturePath(executable))
	}
	if err != nil {
		return fmt.Errorf("read its signature: %w", err)
	}
	return v.Verify(policy, data, digest)
}

// Verify checks a Sigstore bundle (JSON) over bytes whose SHA-256 is digest against
// policy. A *RefusedError says why it does not pass.
func (v *Verifier) Verify(policy Policy, bundleJSON []byte, digest []byte) error {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return refused(ReasonInvalidSignature, "not a Sigstore bundle: %v", err)
	}
	return v.verifyEntity(policy, &b, digest)
}

func (v *Verifier) verifyEntity(policy Policy, entity verify.SignedEntity, digest []byte) error {
	content, err := entity.SignatureContent()
	if err != nil {
		return refused(ReasonInvalidSignature, "no signature in the bundle: %v", err)
	}
	signed := content.MessageSignatureContent()
	if signed == nil {
		return refused(ReasonInvalidSignature, "the bundle holds an attestation, not a signature over the plugin's bytes (cosign sign-blob makes one)")
	}
	if signed.DigestAlgorithm() != "SHA2_256" || !bytes.Equal(signed.Digest(), digest) {
		return refused(ReasonSignedOtherContent, "the signature is over %s %x, the plugin's SHA-256 is %x", signed.DigestAlgorithm(), signed.Digest(), digest)
	}
	verifier, options, err := v.verifierFor(policy)
	if err != nil {
		return err
	}
	if _, err := verifier.Verify(entity, verify.NewPolicy(verify.WithArtifactDigest("sha256", digest), options)); err != nil {
		return refused(ReasonSignedByAnother, "not signed by %s: %v", policy.signer(), err)
	}
	return nil
}

// verifierFor is the verifier of policy's signer and the policy option that names it.
func (v *Verifier) verifierFor(policy Policy) (*verify.Verifier, verify.PolicyOption, error) {
	if !policy.Keyless() {
		key, err := policy.publicKey()
		if err != nil {
			return nil, nil, err
		}
		keyVerifier, err := sigsig.LoadDefaultVerifier(key)
		if err != nil {
			return nil, nil, fmt.Errorf("the policy's public key: %w", err)
		}
		// Whatever key hint the bundle names, the policy's key is the one that counts.
		trusted := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			return root.NewExpiringKey(keyVerifier, time.Time{}, time.Time{}), nil
		})
		// A key-signed bundle made offline has no timestamp; the key has no validity period.
		verifier, err := verify.NewVerifier(trusted, verify.WithNoObserverTimestamps())
		if err != nil {
			return nil, nil, fmt.Errorf("make a verifier of the policy's key: %w", err)
		}
		return verifier, verify.WithKey(), nil
	}
	if v.trusted == nil {
		return nil, nil, refused(ReasonNoTrustedRoot, "the policy names an identity (%s), and the operator has no trusted root to check its certificate against (--plugin-trusted-root)", policy.signer())
	}
	// As cosign verifies a keyless signature: a certificate of the root's CA, logged in
	// its transparency log (which also tells when it was signed), with a certificate
	// timestamp of its CT log when the root has one.
	options := []verify.VerifierOption{verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1)}
	if v.certificateTimestamps > 0 {
		options = append(options, verify.WithSignedCertificateTimestamps(v.certificateTimestamps))
	}
	verifier, err := verify.NewVerifier(v.trusted, options...)
	if err != nil {
		return nil, nil, fmt.Errorf("make a verifier of the trusted root: %w", err)
	}
	identity, err := verify.NewShortCertificateIdentity(policy.Issuer, "", policy.Identity, "")
	if err != nil {
		return nil, nil, fmt.Errorf("the policy's identity: %w", err)
	}
	return verifier, verify.WithCertificateIdentity(identity), nil
}

// signer names whom the policy trusts, for a message.
func (p Policy) signer() string {
	if p.Keyless() {
		return fmt.Sprintf("identity %q of issuer %q", p.Identity, p.Issuer)
	}
	return "the policy's public key"
}
