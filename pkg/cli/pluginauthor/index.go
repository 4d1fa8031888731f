package pluginauthor

import (
	"context"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/stepwise-dev/stepwise/pkg/plugin/index"
	"github.com/stepwise-dev/stepwise/pkg/plugin/layout"
	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// The environment search and install read when their flags are absent, so that a
// platform team sets its index (a mirror, for an air-gapped site) once.
const (
	envIndex    = "STEPWISE_PLUGIN_INDEX"
	envIndexKey = "STEPWISE_PLUGIN_INDEX_KEY"
)

// maxDescription is how much of a description search prints.
const maxDescription = 60

// indexOptions are where the index is and who must have signed it.
type indexOptions struct {
	location, key, identity, issuer, trustedRoot string
}

func (o *indexOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.location, "index", "", "The plugin index: a file or an http(s) URL, its signature next to it (INDEX"+layout.SignatureSuffix+"). Default $"+envIndex+".")
	cmd.Flags().StringVar(&o.key, "index-key", "", "The public key (PEM file) that must have signed the index. Default $"+envIndexKey+" (a file, or the PEM itself).")
	cmd.Flags().StringVar(&o.identity, "index-identity", "", "Keyless: the identity (certificate SAN) that must have signed the index.")
	cmd.Flags().StringVar(&o.issuer, "index-issuer", "", "Keyless: the OIDC issuer of --index-identity.")
	cmd.Flags().StringVar(&o.trustedRoot, "trusted-root", "", "Keyless: the Sigstore trusted_root.json to check the index's certificate against.")
}

// load reads the index and checks its signature against the policy the flags, or the
// environment, name.
func (o *indexOptions) load(ctx context.Context) (*index.Index, string, error) {
	location := o.location
	if location == "" {
		location = os.Getenv(envIndex)
	}
	if location == "" {
		return nil, "", errors.New("no plugin index: give --index URL|FILE, or set " + envIndex)
	}
	policy, err := o.policy()
	if err != nil {
		return nil, "", err
	}
	verifier, err := signature.NewVerifier(o.trustedRoot)
	if err != nil {
		return nil, "", err
	}
	ix, err := index.Load(ctx, location, policy, verifier)
	return ix, location, err
}

func (o *indexOptions) policy() (signature.Policy, error) {
	key := o.key
	if key == "" && o.identity == "" && o.issuer == "" {
		key = os.Getenv(envIndexKey)
	}
	if key == "" && o.identity == "" && o.issuer == "" {
		return signature.Policy{}, errors.New("who must have signed the plugin index: give --index-key PUBLIC-KEY (or set " + envIndexKey +
			"), or --index-identity and --index-issuer")
	}
	policy := signature.Policy{Identity: o.identity, Issuer: o.issuer}
	if key != "" {
		if strings.HasPrefix(strings.TrimSpace(key), "-----BEGIN") {
			policy.PublicKey = key
		} else {
			data, err := os.ReadFile(key)
			if err != nil {
				return signature.Policy{}, fmt.Errorf("read the index's public key: %w", err)
			}
			policy.PublicKey = string(data)
		}
	}
	if err := policy.Validate(); err != nil {
		return signature.Policy{}, fmt.Errorf("who must have signed the plugin index: %w", err)
	}
	return policy, nil
}

func newSearchCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o indexOptions
	cmd := &cobra.Command{
		Use:   "search [TERM] --index URL|FILE --index-key PUBLIC-KEY",
		Short: "List the plugins of a signed plugin index",
		Long: `List the plugins of a plugin index whose name, description or executors contain TERM
(case-insensitive; all of them without TERM), after checking the index's signature
(INDEX` + layout.SignatureSuffix + ` next to it) against the key or identity you give: an index
signed by anyone else, changed after it was signed, or unsigned, is refused. SIGNER is who
signs the plugin's binary, what the operator will check: a key (the first 12 hex digits of
its SHA-256) or a keyless identity. DIGEST is the image's, shortened.`,
		Example: `  kubectl stepwise plugin search --index https://mirror.example/stepwise/plugin-index.yaml --index-key index.pub
  export ` + envIndex + `=/srv/mirror/plugin-index.yaml ` + envIndexKey + `=/srv/mirror/index.pub
  kubectl stepwise plugin search terminate`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, location, err := o.load(cmd.Context())
			if err != nil {
				return err
			}
			term := ""
			if len(args) == 1 {
				term = args[0]
			}
			found := ix.Search(term)
			if len(found) == 0 {
				_, err := fmt.Fprintf(streams.ErrOut, "No plugins in %s match %q.\n", location, term)
				return err
			}
			return printPlugins(streams.Out, found)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func printPlugins(out io.Writer, plugins []index.Plugin) error {
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	_, _ = fmt.Fprintln(tw, "NAME\tDIGEST\tSIGNER\tDESCRIPTION")
	for _, p := range plugins {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Digest[:len("sha256:")+12], signer(p.Signature), shorten(p.Description, maxDescription))
	}
	return tw.Flush()
}

// signer names whom a policy trusts, in a line: a key by its fingerprint (the SHA-256 of
// its DER, as cosign's), or the identity.
func signer(p signature.Policy) string {
	if p.Keyless() {
		return p.Identity
	}
	data := []byte(p.PublicKey)
	if block, _ := pem.Decode(data); block != nil {
		data = block.Bytes
	}
	return fmt.Sprintf("key sha256:%x", sha256.Sum256(data))[:len("key sha256:")+12]
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func newInstallCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var o indexOptions
	var valuesFile string
	cmd := &cobra.Command{
		Use:   "install NAME --index URL|FILE --index-key PUBLIC-KEY [--values FILE]",
		Short: "Write the chart's values that install a plugin of a signed plugin index",
		Long: `Write the chart's plugins[] entry of plugin NAME of a plugin index: its image pinned by
digest and who signs its binary, as the index gives them, after checking the index's
signature as search does; nothing is copied by hand. Without --values it prints the values
(plugins: with that one entry); with --values FILE it puts the entry into FILE, made if
missing: it replaces an entry of the same name, whole, or adds one, and keeps every other
line. Helm then installs the plugin: the operator runs its binary only when its signature
passes that policy. A keyless policy is checked against the chart's pluginTrustedRoot.`,
		Example: `  kubectl stepwise plugin install vsphere --index https://mirror.example/stepwise/plugin-index.yaml \
    --index-key index.pub --values my-values.yaml
  helm upgrade --install stepwise charts/stepwise -n stepwise-system -f my-values.yaml

  # Print the values only
  kubectl stepwise plugin install vsphere --index /srv/mirror/plugin-index.yaml --index-key index.pub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, location, err := o.load(cmd.Context())
			if err != nil {
				return err
			}
			p, ok := ix.Find(args[0])
			if !ok {
				return fmt.Errorf("no plugin %q in the index %s (kubectl stepwise plugin search lists them)", args[0], location)
			}
			entry := index.ChartValues(p)
			if valuesFile == "" {
				values, _, err := index.MergeValues(nil, entry)
				if err != nil {
					return err
				}
				_, err = streams.Out.Write(values)
				return err
			}
			replaced, err := mergeValuesFile(valuesFile, entry)
			if err != nil {
				return err
			}
			did := "added plugin %s to %s"
			if replaced {
				did = "replaced plugin %s in %s"
			}
			_, _ = fmt.Fprintf(streams.Out, did+": image %s, signed by %s\n", p.Name, valuesFile, entry.Image, signer(p.Signature))
			if p.Signature.Keyless() {
				_, _ = fmt.Fprintln(streams.Out, "its signature is keyless: set the chart's pluginTrustedRoot (a Sigstore trusted_root.json) too")
			}
			_, err = fmt.Fprintf(streams.Out, "apply it: helm upgrade --install stepwise charts/stepwise -n stepwise-system -f %s\n", valuesFile)
			return err
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&valuesFile, "values", "", "The chart's values file to put the plugin into, in place (made if missing).")
	return cmd
}

// mergeValuesFile puts entry into the values file at path, made if missing, and says
// whether it replaced one.
func mergeValuesFile(path string, entry index.ChartPlugin) (bool, error) {
	mode := os.FileMode(0o644)
	// Write through a symbolic link, as an editor does, not over it.
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	values, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("read the values: %w", err)
	default:
		if info, err := os.Stat(path); err == nil {
			mode = info.Mode().Perm()
		}
	}
	out, replaced, err := index.MergeValues(values, entry)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	// A temporary file renamed over it: never a half-written values file.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, fmt.Errorf("write the values: %w", err)
	}
	_, err = tmp.Write(out)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return false, fmt.Errorf("write the values: %w", err)
	}
	return replaced, nil
}

func newIndexCommand(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Sign a plugin index, for its maintainers",
		Long: `A plugin index lists plugins by name for kubectl stepwise plugin search and install: a YAML
(or JSON) file

  apiVersion: stepwise.dev/v1alpha1
  kind: PluginIndex
  plugins:
  - name: NAME
    description: ONE LINE
    image: REGISTRY/stepwise-plugin-NAME      # no tag, no digest
    digest: sha256:IMAGE_DIGEST
    executors: [EXECUTOR, ...]
    signature: {publicKey: PEM}               # or {identity: ID, issuer: URL}: who signs the binary

published with its signature next to it, INDEX` + layout.SignatureSuffix + `.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newIndexSignCommand(streams))
	return cmd
}

func newIndexSignCommand(streams genericiooptions.IOStreams) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "sign INDEX --key KEY",
		Short: "Check a plugin index and sign it: writes INDEX" + layout.SignatureSuffix,
		Long: `Check the plugin index INDEX (the entries search and install would refuse are refused
here) and sign its exact bytes with the private key KEY (keygen's), writing the signature
next to it, INDEX` + layout.SignatureSuffix + ` (replaced if there). Publish both side by side: a
change to INDEX after this needs a new signature. Its installers check it against your public
key (--index-key).`,
		Example: `  kubectl stepwise plugin keygen --dir ~/.stepwise-index
  kubectl stepwise plugin index sign plugin-index.yaml --key ~/.stepwise-index/` + signingKeyFile + `
  kubectl stepwise plugin search --index plugin-index.yaml --index-key ~/.stepwise-index/` + publicKeyFile,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			privatePEM, err := os.ReadFile(key)
			if err != nil {
				return fmt.Errorf("read the signing key: %w", err)
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read the plugin index: %w", err)
			}
			ix, err := index.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			bundleJSON, err := signature.Sign(cmd.Context(), data, privatePEM)
			if err != nil {
				return err
			}
			out := index.SignatureLocation(args[0])
			if err := os.WriteFile(out, bundleJSON, 0o644); err != nil {
				return fmt.Errorf("write the signature: %w", err)
			}
			plugins := "plugins"
			if len(ix.Plugins) == 1 {
				plugins = "plugin"
			}
			_, err = fmt.Fprintf(streams.Out, "signed %s (%d %s, sha256 %x): %s\n", args[0], len(ix.Plugins), plugins, sha256.Sum256(data), out)
			return err
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "The private key's PEM file.")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}
