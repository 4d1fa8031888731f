package signature

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Policy is who must have signed a plugin: the holder of a public key, or, keyless, the
// identity a certificate of the trusted root's CA names (a workflow's URI, an e-mail)
// with the OIDC issuer that vouched for it. Exactly one of the two.
type Policy struct {
	// PublicKey is a PEM public key (cosign.pub, or what Keygen makes).
	PublicKey string `json:"publicKey,omitempty"`
	// Identity is the certificate's subject alternative name, exactly.
	Identity string `json:"identity,omitempty"`
	// Issuer is the OIDC issuer of the certificate, exactly.
	Issuer string `json:"issuer,omitempty"`
}

// Keyless says whether the policy names an identity rather than a key.
func (p Policy) Keyless() bool { return p.PublicKey == "" }

// Validate says what is wrong with the policy, if anything.
func (p Policy) Validate() error {
	switch {
	case p.PublicKey != "" && (p.Identity != "" || p.Issuer != ""):
		return errors.New("a public key, or an identity and its issuer, not both")
	case p.PublicKey != "":
		if _, err := p.publicKey(); err != nil {
			return err
		}
		return nil
	case p.Identity == "" || p.Issuer == "":
		return errors.New("a public key, or an identity and its issuer")
	}
	return nil
}

func (p Policy) publicKey() (crypto.PublicKey, error) {
	key, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(p.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("the public key is not a PEM public key: %w", err)
	}
	return key, nil
}

// Policies are the plugins' policies by plugin name (stepwise-plugin-NAME's NAME).
type Policies map[string]Policy

// pluginName is what a plugin's name may be (its executable is stepwise-plugin-NAME).
var pluginName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// LoadPolicies reads a JSON object of policies by plugin name (the chart writes it from
// its values) and validates each.
func LoadPolicies(path string) (Policies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the plugins' signature policies: %w", err)
	}
	var policies Policies
	if err := json.Unmarshal(data, &policies); err != nil {
		return nil, fmt.Errorf("read the plugins' signature policies %s: %w", path, err)
	}
	var errs []error
	for name, p := range policies {
		if !pluginName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%q is not a plugin's name", name))
			continue
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("the signature policy of plugin %s: %w", name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("the plugins' signature policies %s: %w", path, err)
	}
	return policies, nil
}
