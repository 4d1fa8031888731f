package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// resolveYAML substitutes the references of a YAML parameter (contract.ParamYAML) inside
// its scalars, after parsing, so that what a reference brings in (an earlier step's output,
// written by whoever answered that step) stays one value where it stands: it can never add
// keys, objects or documents. A scalar that is one whole reference takes the type of what
// it resolves to when that is a number, a bool or null (replicas: $(params.replicas));
// anything else is a string. Comments and document order are kept.
func (r *resolver) resolveYAML(value string, room int) (string, error) {
	if !strings.Contains(value, "$(") {
		return r.resolve(value, room)
	}
	limit := room
	dec := yaml.NewDecoder(strings.NewReader(value))
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return "", fmt.Errorf("not YAML: %w", err)
		}
		if err := r.resolveNode(&doc, &room); err != nil {
			return "", err
		}
		if err := enc.Encode(&doc); err != nil {
			return "", fmt.Errorf("writing the YAML back: %w", err)
		}
		// Quoting can make the text longer than the values it holds.
		if out.Len() > limit {
			return "", errTooLarge
		}
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("writing the YAML back: %w", err)
	}
	return out.String(), nil
}

// resolveNode substitutes the references in every scalar under n, spending room.
func (r *resolver) resolveNode(n *yaml.Node, room *int) error {
	if n.Kind == yaml.AliasNode {
		return nil // its anchor is resolved where it stands
	}
	for _, child := range n.Content {
		if err := r.resolveNode(child, room); err != nil {
			return err
		}
	}
	if n.Kind != yaml.ScalarNode || !strings.Contains(n.Value, "$(") {
		return nil
	}
	resolved, err := r.resolve(n.Value, *room)
	if err != nil {
		return err
	}
	*room -= len(resolved)
	whole := referencePattern.FindString(n.Value) == n.Value
	n.Value = resolved
	n.Tag = "!!str" // the encoder quotes the value whenever plain text would read as more
	if whole && n.Style == 0 {
		probe := yaml.Node{Kind: yaml.ScalarNode, Value: resolved}
		switch tag := probe.ShortTag(); tag {
		case "!!int", "!!float", "!!bool", "!!null":
			n.Tag = tag
		}
	}
	return nil
}
