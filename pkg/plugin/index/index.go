// Package index is the plugin index: a signed list of plugins by name, each with its image,
// the image's digest and who signs its binary, so that an installer adds a plugin by name
// (kubectl stepwise plugin install) and copies no digest or key by hand. An index is signed
// as a plugin's binary is, a Sigstore bundle over its exact bytes next to it
// (INDEX.sigstore.json, URL.sigstore.json); Load checks it before it reads a byte of the
// index as YAML, against the installer's policy, never the index's.
package index

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

const (
	// APIVersion and Kind name the index's format.
	APIVersion = "stepwise.dev/v1alpha1"
	Kind       = "PluginIndex"

	// MaxPlugins and MaxSize bound what an index may cost its reader.
	MaxPlugins = 1000
	MaxSize    = 4 << 20

	// maxNameLength is the chart's limit of plugins[].name (values.schema.json), shorter
	// than a DNS label's: an entry the chart refuses is no use in an index.
	maxNameLength        = 40
	maxDescriptionLength = 1000
	maxExecutors         = 100
)

var (
	// name is a plugin's name: stepwise-plugin-NAME's NAME, a lower-case DNS label.
	name   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// repository is an image's repository without tag or digest: an optional registry host
	// (and port), then lower-case path components, as the reference grammar has them.
	repository = regexp.MustCompile(`^([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	executor   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)
)

// Index is a list of plugins an installer may add by name.
type Index struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Plugins    []Plugin `json:"plugins"`
}

// Plugin is one plugin of an index: where its image is, pinned, and who signs its binary.
type Plugin struct {
	// Name is the plugin's name, its executable's stepwise-plugin-NAME's NAME.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Image is the image's repository, without tag or digest
	// (registry.example/stepwise-plugin-NAME); Digest pins it (sha256:HEX).
	Image  string `json:"image"`
	Digest string `json:"digest"`
	// Executors are the executors the plugin serves, for search.
	Executors []string `json:"executors,omitempty"`
	// Signature is who signs the plugin's binary: the chart's plugins[].signature.
	Signature signature.Policy `json:"signature"`
}

// Parse reads and validates an index whose signature the caller has checked (Load does);
// index maintainers' tools use it to check an index before they sign it.
func Parse(data []byte) (*Index, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("the index is larger than %d bytes", MaxSize)
	}
	var ix Index
	// Strict: a misspelt field is an error, not a plugin silently without its policy.
	if err := yaml.UnmarshalStrict(data, &ix); err != nil {
		return nil, fmt.Errorf("read the index: %w", err)
	}
	if err := ix.Validate(); err != nil {
		return nil, err
	}
	return &ix, nil
}

// Validate says everything wrong with the index, if anything.
func (ix *Index) Validate() error {
	if ix.APIVersion != APIVersion || ix.Kind != Kind {
		return fmt.Errorf("apiVersion %q, kind %q: not a %s %s", ix.APIVersion, ix.Kind, APIVersion, Kind)
	}
	if len(ix.Plugins) > MaxPlugins {
		return fmt.Errorf("%d plugins: an index holds at most %d", len(ix.Plugins), MaxPlugins)
	}
	var errs []error
	seen := make(map[string]bool, len(ix.Plugins))
	for i, p := range ix.Plugins {
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("plugins[%d] (%s): %w", i, p.Name, err))
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("plugins[%d]: a second plugin named %q", i, p.Name))
		}
		seen[p.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the index: %w", err)
	}
	return nil
}

// Validate says everything wrong with the entry, if anything.
func (p Plugin) Validate() error {
	var errs []error
	if len(p.Name) > maxNameLength || !name.MatchString(p.Name) {
		errs = append(errs, fmt.Errorf("name %q: not a lower-case DNS label of at most %d characters", p.Name, maxNameLength))
	}
	if len(p.Description) > maxDescriptionLength || !printable(p.Description) {
		errs = append(errs, fmt.Errorf("description: one line of at most %d printable characters", maxDescriptionLength))
	}
	if len(p.Image) > 255 || !repository.MatchString(p.Image) {
		errs = append(errs, fmt.Errorf("image %q: not an image's repository without tag or digest (registry.example/stepwise-plugin-NAME)", p.Image))
	}
	if !digest.MatchString(p.Digest) {
		errs = append(errs, fmt.Errorf("digest %q: not sha256: and 64 lower-case hex digits", p.Digest))
	}
	if len(p.Executors) > maxExecutors {
		errs = append(errs, fmt.Errorf("%d executors: at most %d", len(p.Executors), maxExecutors))
	}
	for _, e := range p.Executors {
		if !executor.MatchString(e) {
			errs = append(errs, fmt.Errorf("executor %q: not an executor's name", e))
		}
	}
	if err := p.Signature.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("signature: %w", err))
	} else if p.Signature.Keyless() {
		if !printable(p.Signature.Identity) || !printable(p.Signature.Issuer) {
			errs = append(errs, errors.New("signature: an identity and an issuer of printable characters"))
		}
		// As the chart's schema: an OIDC issuer is an https URL.
		if !strings.HasPrefix(p.Signature.Issuer, "https://") {
			errs = append(errs, fmt.Errorf("signature: issuer %q is not an https URL", p.Signature.Issuer))
		}
	}
	return errors.Join(errs...)
}

// printable: no control characters, which a terminal would act on when search prints it.
func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}

// Find returns the plugin named name, and whether there is one.
func (ix *Index) Find(name string) (Plugin, bool) {
	for _, p := range ix.Plugins {
		if p.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

// Search returns the plugins whose name, description or one of whose executors contains
// term, case-insensitively (every plugin for an empty term), sorted by name.
func (ix *Index) Search(term string) []Plugin {
	term = strings.ToLower(term)
	var found []Plugin
	for _, p := range ix.Plugins {
		if matches(p, term) {
			found = append(found, p)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return found
}

func matches(p Plugin, term string) bool {
	if strings.Contains(p.Name, term) || strings.Contains(strings.ToLower(p.Description), term) {
		return true
	}
	for _, e := range p.Executors {
		if strings.Contains(strings.ToLower(e), term) {
			return true
		}
	}
	return false
}
