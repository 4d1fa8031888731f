package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/stepwise-dev/stepwise/pkg/plugin/signature"
)

// ChartPlugin is an entry of the chart's plugins[] (charts/stepwise/values.yaml): the
// image pinned by digest, and who must have signed its binary.
type ChartPlugin struct {
	Name      string           `json:"name"`
	Image     string           `json:"image"`
	Signature signature.Policy `json:"signature"`
}

// ChartValues is the chart's plugins[] entry of p.
func ChartValues(p Plugin) ChartPlugin {
	return ChartPlugin{Name: p.Name, Image: p.Image + "@" + p.Digest, Signature: p.Signature}
}

// MergeValues puts plugin into the chart's values document values (empty: a new one): it
// replaces the entry of plugins[] of the same name, whole (an old sha256 would pin the old
// binary), or appends one. Only the plugins section is rewritten: every other line, the
// other keys with their comments and blank lines, is kept as it was (unless plugins is not
// a block list under a key at the start of its line: then the whole document is written
// anew, its values and comments kept). It returns the document and whether it replaced an
// entry.
func MergeValues(values []byte, plugin ChartPlugin) ([]byte, bool, error) {
	doc, err := valuesDocument(values)
	if err != nil {
		return nil, false, err
	}
	entry, err := node(plugin)
	if err != nil {
		return nil, false, err
	}
	var key, plugins *yaml.Node
	if doc != nil {
		key, plugins = entryOf(doc.Content[0], "plugins")
	}
	switch {
	case plugins == nil || (plugins.Kind == yaml.ScalarNode && plugins.Tag == "!!null"):
		plugins = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	case plugins.Kind != yaml.SequenceNode:
		return nil, false, fmt.Errorf("the values' plugins (line %d) is not a list", plugins.Line)
	}
	// plugins: [] becomes a block list, as the chart's values.yaml writes entries.
	plugins.Style = 0
	replaced := false
	for i, item := range plugins.Content {
		if _, n := entryOf(item, "name"); n != nil && n.Value == plugin.Name {
			entry.HeadComment, entry.LineComment, entry.FootComment = item.HeadComment, item.LineComment, item.FootComment
			plugins.Content[i] = entry
			replaced = true
			break
		}
	}
	if !replaced {
		plugins.Content = append(plugins.Content, entry)
	}
	// The key's comments stay where they are in the text, above the section.
	section, err := encode(&yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: "plugins"}, plugins}})
	if err != nil {
		return nil, false, fmt.Errorf("write the values: %w", err)
	}
	if key == nil {
		return appendSection(values, section), replaced, nil
	}
	// The section is found by its lines: make sure nothing else moved.
	if out := replaceSection(values, key.Line, section); out != nil && sameOtherKeys(values, out, len(plugins.Content)) {
		return out, replaced, nil
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i] == key {
			root.Content[i+1] = plugins
		}
	}
	out, err := encode(doc)
	if err != nil {
		return nil, false, fmt.Errorf("write the values: %w", err)
	}
	return out, replaced, nil
}

// valuesDocument is the one YAML document of values, its root a mapping; nil when there
// is none (empty, comments alone, null).
func valuesDocument(values []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(values))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the values: %w", err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, errors.New("read the values: more than one YAML document")
	}
	switch {
	case len(doc.Content) == 1 && doc.Content[0].Tag == "!!null":
		return nil, nil
	case len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode:
		return nil, errors.New("read the values: not a mapping of keys to values")
	}
	return &doc, nil
}

// entryOf is the key node of key in mapping and its value, or nils.
func entryOf(mapping *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if mapping.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		if mapping.Content[i].Value == key {
			return mapping.Content[i], mapping.Content[i+1]
		}
	}
	return nil, nil
}

// sameOtherKeys says whether after has the keys and values of before but plugins, and
// plugins entries.
func sameOtherKeys(before, after []byte, plugins int) bool {
	var b, a map[string]any
	if yaml.Unmarshal(before, &b) != nil || yaml.Unmarshal(after, &a) != nil {
		return false
	}
	list, ok := a["plugins"].([]any)
	delete(a, "plugins")
	delete(b, "plugins")
	return ok && len(list) == plugins && reflect.DeepEqual(a, b)
}

// appendSection adds section at the end of values.
func appendSection(values, section []byte) []byte {
	values = bytes.TrimRight(values, "\n")
	if len(values) == 0 {
		return section
	}
	return append(append(values, '\n'), section...)
}

// replaceSection replaces the lines of the top-level key at keyLine (1-based) and its
// block value with section: from the key's line to the last line after it that is
// indented or a list's "-" (the chart writes plugins' entries at column 0), comments and
// blank lines between them included, those before the next key not (they are its).
func replaceSection(values []byte, keyLine int, section []byte) []byte {
	lines := strings.SplitAfter(string(values), "\n")
	start := keyLine - 1
	if start < 0 || start >= len(lines) || lines[start] == "" || lines[start][0] == ' ' || lines[start][0] == '\t' {
		return nil
	}
	last := start
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if l[0] != ' ' && l[0] != '\t' && trimmed != "-" && !strings.HasPrefix(l, "- ") {
			break
		}
		last = i
	}
	var out strings.Builder
	out.WriteString(strings.Join(lines[:start], ""))
	out.Write(section)
	out.WriteString(strings.Join(lines[last+1:], ""))
	return []byte(out.String())
}

// node is v as a block-style YAML node, its fields in their order and named by their json
// tags (signature.Policy has no others); a multi-line string is a literal block, as a PEM
// key is best read.
func node(v any) (*yaml.Node, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	var doc yaml.Node
	// JSON is YAML: its flow style and quotes are reset below.
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	n := doc.Content[0]
	blockStyle(n)
	return n, nil
}

func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "\n") {
		n.Style = yaml.LiteralStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// encode writes n as the chart's values.yaml is written: two spaces, a list's "-" under
// its key.
func encode(n *yaml.Node) ([]byte, error) {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Marshal validates the index and writes it as YAML.
func Marshal(ix *Index) ([]byte, error) {
	if err := ix.Validate(); err != nil {
		return nil, err
	}
	if ix.Plugins == nil {
		// plugins: [], not null.
		ix = &Index{APIVersion: ix.APIVersion, Kind: ix.Kind, Plugins: []Plugin{}}
	}
	n, err := node(ix)
	if err != nil {
		return nil, err
	}
	data, err := encode(n)
	if err != nil {
		return nil, fmt.Errorf("write the index: %w", err)
	}
	return data, nil
}

// Write is the index's file, as Marshal writes it, and its signature with the private key
// in PEM (signature.Sign's): what to publish as INDEX and INDEX.sigstore.json.
func Write(ctx context.Context, ix *Index, privatePEM []byte) (indexBytes, bundleJSON []byte, err error) {
	indexBytes, err = Marshal(ix)
	if err != nil {
		return nil, nil, err
	}
	bundleJSON, err = signature.Sign(ctx, indexBytes, privatePEM)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the index: %w", err)
	}
	return indexBytes, bundleJSON, nil
}
