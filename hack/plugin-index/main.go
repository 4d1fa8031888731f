// Command plugin-index writes the project's plugin index from what hack/images.sh printed,
// and signs it: INDEX and INDEX.sigstore.json, for kubectl stepwise plugin search and
// install. hack/images.sh runs it when SIGNING_KEY is set (make images SIGNING_KEY=...):
//
//	go run ./hack/plugin-index -images-out bin/image/plugin-images.txt -signing-key stepwise-signing.key \
//	    -o bin/images/plugin-index.yaml
//
// Each plugin is a line "stepwise-plugin-NAME: image REPO/stepwise-plugin-NAME@DIGEST" of
// -images-out (the other lines are left alone); its description is the first sentence of
// plugins/NAME/README.md's first paragraph, if any; who signs its binary is -public-key,
// by default the public key of -signing-key, which signs the index too.
package main

import (
	"bufio"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/stepwise-dev/stepwise/pkg/plugin/index"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// imageLine is hack/images.sh's line of a plugin's image by digest.
var imageLine = regexp.MustCompile(`^stepwise-plugin-([a-z0-9-]+): image (\S+)@(sha256:[0-9a-f]{64})$`)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "plugin-index:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("plugin-index", flag.ContinueOnError)
	imagesOut := flags.String("images-out", "", "what hack/images.sh printed (its stepwise-plugin-NAME: image lines)")
	publicKey := flags.String("public-key", "", "the public key (PEM) that signs the plugins' binaries; default: -signing-key's")
	signingKey := flags.String("signing-key", "", "the private key (PEM) that signs the index")
	plugins := flags.String("plugins", "plugins", "the plugins' sources, for each plugins/NAME/README.md's description")
	out := flags.String("o", "", "the index to write; its signature goes next to it")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *imagesOut == "" || *signingKey == "" || *out == "" || flags.NArg() > 0 {
		return errors.New("usage: plugin-index -images-out FILE -signing-key KEY [-public-key PUB] [-plugins DIR] -o INDEX")
	}
	privatePEM, err := os.ReadFile(*signingKey)
	if err != nil {
		return fmt.Errorf("read the signing key: %w", err)
	}
	policy, err := pluginsPolicy(*publicKey, privatePEM)
	if err != nil {
		return err
	}
	images, err := os.ReadFile(*imagesOut)
	if err != nil {
		return fmt.Errorf("read the images: %w", err)
	}
	ix, err := build(string(images), policy, *plugins)
	if err != nil {
		return err
	}
	data, bundle, err := index.Write(ctx, ix, privatePEM)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("write the index: %w", err)
	}
	if err := os.WriteFile(index.SignatureLocation(*out), bundle, 0o644); err != nil {
		return fmt.Errorf("write the index's signature: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "wrote %s (%d plugins) and its signature %s\n", *out, len(ix.Plugins), index.SignatureLocation(*out))
	return err
}

// build is the index of the plugins images lists, signed under policy.
func build(images string, policy signature.Policy, plugins string) (*index.Index, error) {
	ix := &index.Index{APIVersion: index.APIVersion, Kind: index.Kind}
	for line := range strings.Lines(images) {
		m := imageLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		description, err := describe(filepath.Join(plugins, m[1], "README.md"))
		if err != nil {
			return nil, err
		}
		ix.Plugins = append(ix.Plugins, index.Plugin{Name: m[1], Description: description, Image: m[2], Digest: m[3], Signature: policy})
	}
	if len(ix.Plugins) == 0 {
		return nil, errors.New(`no "stepwise-plugin-NAME: image REPO@sha256:..." line in the images' output`)
	}
	return ix, nil
}

// markup is what describe drops of Markdown: emphasis, code and links' targets.
var markup = strings.NewReplacer("**", "", "`", "", "[", "", "]", "")

// describe is the first sentence of the README's first paragraph that is not a heading,
// without markup; "" without a README.
func describe(readme string) (string, error) {
	f, err := os.Open(readme)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the description: %w", err)
	}
	defer func() { _ = f.Close() }()
	var paragraph []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case strings.HasPrefix(line, "#") && len(paragraph) == 0:
		case line == "" && len(paragraph) == 0:
		case line == "" || strings.HasPrefix(line, "#"):
			return sentence(paragraph), nil
		default:
			paragraph = append(paragraph, line)
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", readme, err)
	}
	return sentence(paragraph), nil
}

// link is a Markdown link's target, "(...)" right after "]".
var link = regexp.MustCompile(`\]\([^)]*\)`)

func sentence(lines []string) string {
	text := markup.Replace(link.ReplaceAllString(strings.Join(lines, " "), "]"))
	if i := strings.Index(text, ". "); i >= 0 {
		text = text[:i+1]
	}
	if r := []rune(text); len(r) > 200 {
		text = string(r[:199]) + "…"
	}
	return text
}

// pluginsPolicy is the policy of the plugins' binaries: the public key in file, or else
// the public key of the signing key.
func pluginsPolicy(file string, privatePEM []byte) (signature.Policy, error) {
	var public []byte
	if file != "" {
		var err error
		if public, err = os.ReadFile(file); err != nil {
			return signature.Policy{}, fmt.Errorf("read the plugins' public key: %w", err)
		}
	} else {
		var err error
		if public, err = publicOf(privatePEM); err != nil {
			return signature.Policy{}, err
		}
	}
	policy := signature.Policy{PublicKey: string(public)}
	if err := policy.Validate(); err != nil {
		return signature.Policy{}, fmt.Errorf("the plugins' public key: %w", err)
	}
	return policy, nil
}

// publicOf is the public key, PEM, of a private key in PEM (PKCS #8 or SEC 1), as keygen
// writes it.
func publicOf(privatePEM []byte) ([]byte, error) {
	block, _ := pem.Decode(privatePEM)
	if block == nil {
		return nil, errors.New("the signing key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return nil, fmt.Errorf("read the signing key: %w", err)
		}
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the signing key is not a private key")
	}
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, fmt.Errorf("encode the public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
