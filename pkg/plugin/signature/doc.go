// Package signature verifies that a plugin's executable was signed by whom the installer
// trusts, before the operator runs it, and signs one for its author. A signature is a
// Sigstore bundle over the executable's bytes, as `cosign sign-blob --bundle` makes it
// (new bundle format), kept next to the executable (layout.SignaturePath); the policy of who must
// have signed is the installer's, never the plugin's: a public key, or a keyless identity
// and issuer checked against an offline trusted root. Verification uses sigstore-go.
package signature
