package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// LogLine is one line of hclog's JSON, as sdk.Logger and go-plugin write them to a
// plugin's standard error: {"@level":"info","@message":"...","@module":"...","key":value}.
type LogLine struct {
	Level hclog.Level
	// Module is the logger's name, when it has one.
	Module  string
	Message string
	// Fields are the line's own keys, those not starting with "@"; numbers stay as
	// written (json.Number).
	Fields map[string]any
}

// ParseLogLine reads a line of hclog's JSON; false for any other line (plain text, JSON
// without a message). A level it does not know is Info.
func ParseLogLine(line []byte) (LogLine, bool) {
	if !bytes.HasPrefix(line, []byte("{")) {
		return LogLine{}, false
	}
	var entry map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&entry) != nil {
		return LogLine{}, false
	}
	message, ok := entry["@message"].(string)
	if !ok {
		return LogLine{}, false
	}
	levelName, _ := entry["@level"].(string)
	level := hclog.LevelFromString(levelName)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	module, _ := entry["@module"].(string)
	fields := map[string]any{}
	for k, v := range entry {
		if !strings.HasPrefix(k, "@") {
			fields[k] = v
		}
	}
	return LogLine{Level: level, Module: module, Message: message, Fields: fields}, true
}

// String is the line as a person reads it: "[LEVEL] module: message key=value...", keys
// sorted, a string quoted when it is empty or holds a space, a tab, a quote or "=", any
// other value as JSON.
func (l LogLine) String() string {
	var b strings.Builder
	b.WriteString("[" + strings.ToUpper(l.Level.String()) + "] ")
	if l.Module != "" {
		b.WriteString(l.Module + ": ")
	}
	b.WriteString(l.Message)
	for _, k := range slices.Sorted(maps.Keys(l.Fields)) {
		v, isString := l.Fields[k].(string)
		if !isString {
			data, _ := json.Marshal(l.Fields[k])
			v = string(data)
		} else if v == "" || strings.ContainsAny(v, " \t\"=") {
			v = fmt.Sprintf("%q", v)
		}
		b.WriteString(" " + k + "=" + v)
	}
	return b.String()
}
