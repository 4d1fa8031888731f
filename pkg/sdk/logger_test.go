package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/contract"
)

const logSecret = "s3cr3t-token-value"

// goPluginTimestamp is the layout go-plugin's host parses "@timestamp" with; a line whose
// timestamp does not parse is logged as unparsed text at debug level.
const goPluginTimestamp = "2006-01-02T15:04:05.000000Z07:00"

// lines decodes every JSON line of buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func hookRequest() *Request {
	return &Request{Pipeline: PipelineRef{Namespace: "ns", Name: "retire"}, Step: "terminate", Hook: HookCreate}
}

func TestLoggerWritesHclogJSONLines(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, "debug"},
		{slog.LevelInfo, "info"},
		{slog.LevelWarn, "warn"},
		{slog.LevelError, "error"},
		{slog.LevelError + 4, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var buf bytes.Buffer
			newHookLogger(&buf, Redactor{}, "test.exec", hookRequest()).Log(context.Background(), tt.level, "instance terminated", "instanceID", "i-42", "attempt", 2)
			got := lines(t, &buf)
			require.Len(t, got, 1)
			line := got[0]
			stamp, ok := line["@timestamp"].(string)
			require.True(t, ok, "%v", line)
			_, err := time.Parse(goPluginTimestamp, stamp)
			require.NoError(t, err)
			delete(line, "@timestamp")
			assert.Equal(t, map[string]any{
				"@level": tt.want, "@message": "instance terminated",
				"pipeline": "ns/retire", "step": "terminate", "executor": "test.exec", "hook": "Create",
				"instanceID": "i-42", "attempt": float64(2),
			}, line)
		})
	}
}

// stringer is a fmt.Stringer that shows a secret.
type stringer string

func (s stringer) String() string { return "target " + string(s) }

func TestLoggerDropsWhatIsBelowDebug(t *testing.T) {
	var buf bytes.Buffer
	newLogger(&buf, Redactor{}).Log(context.Background(), slog.LevelDebug-4, "trace")
	assert.Empty(t, buf.String(), "the operator logs nothing below debug")
}

func TestLoggerRemovesTheCallsSecrets(t *testing.T) {
	r := contract.NewRedactor(map[string][]byte{"token": []byte(logSecret)})
	var buf bytes.Buffer
	newHookLogger(&buf, r, "test.exec", hookRequest()).Warn("calling with "+logSecret,
		"url", "https://hooks.example.com/x?token="+logSecret,
		"err", errors.New("401 for "+logSecret),
		"target", stringer(logSecret),
		"raw", []byte(logSecret),
		"object", map[string]string{"token": logSecret},
		slog.Group("call", "header", "Bearer "+logSecret),
		"count", 3,
	)
	assert.NotContains(t, buf.String(), logSecret)
	line := lines(t, &buf)[0]
	assert.Equal(t, "calling with "+contract.Redacted, line["@message"])
	assert.Equal(t, "https://hooks.example.com/x?token="+contract.Redacted, line["url"])
	assert.Equal(t, "401 for "+contract.Redacted, line["err"])
	assert.Equal(t, "target "+contract.Redacted, line["target"])
	assert.Equal(t, contract.Redacted, line["raw"])
	assert.Equal(t, `{"token":"`+contract.Redacted+`"}`, line["object"])
	assert.Equal(t, map[string]any{"header": "Bearer " + contract.Redacted}, line["call"])
	assert.Equal(t, float64(3), line["count"], "other values stay as they are")
}

// logging logs from its hook through the context's Logger.
type logging struct{ Base }

func (logging) Name() string { return "test.logging" }

func (logging) Create(ctx context.Context, req *Request) (Result, error) {
	Logger(ctx).Info("using " + string(req.Secrets["token"]))
	return Done("logged"), nil
}

func TestHooksGetTheirLoggerInTheirContext(t *testing.T) {
	var buf bytes.Buffer
	req := hookRequest()
	req.Secrets = map[string][]byte{"token": []byte(logSecret)}
	_, err := runHook(context.Background(), logging{}, req, &buf)
	require.NoError(t, err)
	line := lines(t, &buf)[0]
	assert.Equal(t, "using "+contract.Redacted, line["@message"])
	assert.Equal(t, "test.logging", line["executor"])
	assert.Equal(t, "ns/retire", line["pipeline"])
}

func TestLoggerOutsideAHookWritesToStderr(t *testing.T) {
	l := Logger(context.Background())
	require.NotNil(t, l)
	assert.True(t, l.Enabled(context.Background(), slog.LevelDebug))
	own := newLogger(&bytes.Buffer{}, Redactor{})
	assert.Same(t, own, Logger(withLogger(context.Background(), own)))
}
