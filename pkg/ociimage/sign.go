package ociimage

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"

	pluginlayout "github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// SignPlugin signs the plugin binary with the private key (PEM) in keyFile and writes the
// signature next to it, BINARY.sigstore.json, where PluginSpec puts it in the image and
// the operator looks for it. It returns the SHA-256 of the bytes it signed.
func SignPlugin(ctx context.Context, binary, keyFile string) ([sha256.Size]byte, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("read the signing key: %w", err)
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("read the plugin to sign: %w", err)
	}
	bundleJSON, err := signature.Sign(ctx, content, key)
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("sign %s: %w", binary, err)
	}
	if err := os.WriteFile(pluginlayout.SignaturePath(binary), bundleJSON, 0o644); err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("write the signature of %s: %w", binary, err)
	}
	return sha256.Sum256(content), nil
}
