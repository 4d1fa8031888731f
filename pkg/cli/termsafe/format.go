package cli

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// checkOutput refuses an -o the commands do not offer.
func checkOutput(output string) error {
	switch output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q is not supported: use json or yaml", output)
}

// encodeOutput encodes obj for -o json or -o yaml as kubectl's printers do (JSON indented
// by four spaces; YAML converted from the JSON), with the control characters the JSON
// encoder leaves escaped (see escapeJSON).
func encodeOutput(obj any, output string) ([]byte, error) {
	data, err := json.MarshalIndent(obj, "", "    ")
	if err != nil {
		return nil, fmt.Errorf("encode as JSON: %w", err)
	}
	data = escapeJSON(data)
	if output == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return nil, fmt.Errorf("encode as YAML: %w", err)
		}
		return data, nil
	}
	return append(data, '\n'), nil
}
