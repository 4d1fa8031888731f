package termsafe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// CheckFormat refuses an -o the commands do not offer: those Encode writes.
func CheckFormat(output string) error {
	switch output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q is not supported: use json or yaml", output)
}

// Encode encodes obj for -o json or -o yaml as kubectl's printers do (JSON indented
// by four spaces; YAML converted from the JSON), with the control characters the JSON
// encoder leaves escaped (see escapeJSON).
func Encode(obj any, output string) ([]byte, error) {
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

// escapeJSON escapes, in JSON that encoding/json wrote, the control characters it leaves
// as they are: DEL and C1 (it escapes C0 itself). Outside strings such JSON holds only
// ASCII punctuation and white space, so these can only stand inside strings, where a \u
// escape means the same: the document says what it said, no longer drives the terminal,
// and no longer makes the YAML encoder refuse it.
func escapeJSON(data []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(data))
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		switch {
		case r == utf8.RuneError && size == 1: // encoding/json writes none; JSON is UTF-8
			b.WriteString(`\ufffd`)
		case isControl(r) && r >= 0x7f:
			_, _ = fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.Write(data[:size])
		}
		data = data[size:]
	}
	return b.Bytes()
}
