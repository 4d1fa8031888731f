package pluginauthor

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/ociimage"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// Names of the key pair keygen writes.
const (
	signingKeyFile = "stepwise-signing.key"
	publicKeyFile  = "stepwise-signing.pub"
)

func newKeygenCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "keygen [--dir DIR]",
		Short: "Make a key pair to sign plugins with",
		Long: `Write an ECDSA P-256 key pair to DIR (default the current directory;
made, mode 0700, if missing): ` + signingKeyFile + `
(the private key, PKCS #8 PEM, mode 0600: keep it secret, e.g. in your CI's secrets) and
` + publicKeyFile + ` (the public key: what the installers of your plugin put in the chart's
plugins[].signature.publicKey). Existing files are never overwritten.`,
		Example: `  kubectl stepwise plugin keygen --dir ~/.stepwise`,
		Args:    cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			private, public, err := signature.Keygen()
			if err != nil {
				return err
			}
			// Private to its owner when keygen makes it, as ssh-keygen's ~/.ssh.
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return fmt.Errorf("making the key pair's directory: %w", err)
			}
			keyPath, pubPath := filepath.Join(dir, signingKeyFile), filepath.Join(dir, publicKeyFile)
			if err := writeExclusive(keyPath, private, 0o600); err != nil {
				return err
			}
			if err := writeExclusive(pubPath, public, 0o644); err != nil {
				return errors.Join(err, os.Remove(keyPath))
			}
			_, err = fmt.Fprintf(streams.Out, "wrote %s (secret) and %s\n", keyPath, pubPath)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "Directory to write the key pair to.")
	return cmd
}

func newSignCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "sign BINARY --key KEY",
		Short: "Sign a plugin binary: writes BINARY" + layout.SignatureSuffix,
		Long: `Sign the plugin binary BINARY with the private key KEY (keygen's, or any unencrypted ECDSA
P-256 PEM key) and write the signature next to it, BINARY` + layout.SignatureSuffix + `: a
Sigstore bundle, as cosign sign-blob --bundle --new-bundle-format --tlog-upload=false
makes it, which cosign verify-blob --key --insecure-ignore-tlog accepts. Ship it in the
plugin's image next to the binary (make images does when SIGNING_KEY is set): the operator
runs the binary only when the signature is over its very bytes, by the key the chart's
plugins[].signature names.`,
		Example: `  kubectl stepwise plugin sign bin/plugins/` + pluginPrefix + `acme --key ~/.stepwise/` + signingKeyFile,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// What plugin image --signing-key does: the signature its image holds.
			digest, err := ociimage.SignPlugin(cmd.Context(), args[0], key)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(streams.Out, "signed %s (sha256 %x): %s\n", args[0], digest, layout.SignaturePath(args[0]))
			return err
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "The private key's PEM file.")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func newVerifyCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "verify BINARY --key PUBLIC-KEY",
		Short: "Check a plugin binary's signature as the operator does",
		Long: `Check the signature next to BINARY (BINARY` + layout.SignaturePath("") + `) against the public key, as
the operator does before it runs an installed plugin: it must be a signature of BINARY's
very bytes by that key. Exits non-zero, saying why, when it is not.`,
		Example: `  kubectl stepwise plugin verify bin/plugins/` + pluginPrefix + `acme --key ~/.stepwise/` + publicKeyFile,
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			publicPEM, err := os.ReadFile(key)
			if err != nil {
				return fmt.Errorf("read the public key: %w", err)
			}
			policy := signature.Policy{PublicKey: string(publicPEM)}
			if err := policy.Validate(); err != nil {
				return err
			}
			digest, err := sha256File(args[0])
			if err != nil {
				return err
			}
			verifier, err := signature.NewVerifier("")
			if err != nil {
				return err
			}
			if err := verifier.VerifyFile(policy, args[0], digest); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			_, err = fmt.Fprintf(streams.Out, "%s: signed by %s\n", args[0], key)
			return err
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "The public key's PEM file.")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func sha256File(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the plugin: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("read the plugin: %w", err)
	}
	return h.Sum(nil), nil
}
