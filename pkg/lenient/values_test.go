package lenient

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// TestValueReaderFindsWhereEachValueEnds: brackets and quotes inside strings, escapes, and
// values that end at the stream's end; a value cut short is io.ErrUnexpectedEOF.
func TestValueReaderFindsWhereEachValueEnds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		stream  string
		want    []string
		wantErr error
	}{
		{name: "object with brackets in strings", stream: ` {"a":"}]","b":["{"]} `, want: []string{`{"a":"}]","b":["{"]}`}},
		{name: "escaped quote and backslash", stream: `{"a":"x\"}\\"} {"b":1}`, want: []string{`{"a":"x\"}\\"}`, `{"b":1}`}},
		{name: "a string", stream: `"a\"b" "c"`, want: []string{`"a\"b"`, `"c"`}},
		{name: "literals and numbers", stream: "null\ttrue -1.5e3\n42", want: []string{"null", "true", "-1.5e3", "42"}},
		{name: "nested arrays", stream: `[[1,[2]],{"x":[{}]}]`, want: []string{`[[1,[2]],{"x":[{}]}]`}},
		{name: "cut short in an object", stream: `{"a":[1,2`, wantErr: io.ErrUnexpectedEOF},
		{name: "cut short in a string", stream: `{"a":"abc`, wantErr: io.ErrUnexpectedEOF},
		{name: "nothing", stream: "  ", wantErr: io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := newValueReader(strings.NewReader(tt.stream))
			var got []string
			for range len(tt.want) {
				raw, err := v.value()
				require.NoError(t, err)
				got = append(got, string(raw))
			}
			assert.Equal(t, tt.want, got)
			if tt.wantErr != nil {
				_, err := v.value()
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			_, err := v.peek()
			assert.ErrorIs(t, err, io.EOF, "the stream ends after the last value")
		})
	}
}

// TestValueReaderSplitsWhatEncodingJSONWrites: random values (strings with quotes,
// backslashes, brackets and non-ASCII) written one after the other, through a small
// buffer so that values span reads, come back exactly.
func TestValueReaderSplitsWhatEncodingJSONWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var want []string
	var stream strings.Builder
	for range 300 {
		raw, err := json.Marshal(randomValue(r, 4))
		require.NoError(t, err)
		want = append(want, string(raw))
		stream.Write(raw)
		stream.WriteString([]string{" ", "\n", "\t\r\n "}[r.IntN(3)]) // as between list items or watch events
	}
	v := newValueReader(&oneByteAtATime{r: strings.NewReader(stream.String())})
	for i, w := range want {
		raw, err := v.value()
		require.NoError(t, err, "value %d", i)
		require.Equal(t, w, string(raw), "value %d", i)
	}
}

func randomValue(r *rand.Rand, depth int) any {
	kind := r.IntN(6)
	if depth == 0 {
		kind = r.IntN(3)
	}
	switch kind {
	case 0:
		return randomString(r)
	case 1:
		return r.NormFloat64() * 1e6
	case 2:
		return []any{nil, true, false}[r.IntN(3)]
	case 3, 4:
		m := map[string]any{}
		for range r.IntN(5) {
			m[randomString(r)] = randomValue(r, depth-1)
		}
		return m
	default:
		var a []any
		for range r.IntN(5) {
			a = append(a, randomValue(r, depth-1))
		}
		return a
	}
}

func randomString(r *rand.Rand) string {
	const alphabet = `ab{}[]",:\ é` + "\n\t\x01"
	runes := []rune(alphabet)
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

// oneByteAtATime is a reader that returns a byte per Read, as a slow network might.
type oneByteAtATime struct{ r io.Reader }

func (o *oneByteAtATime) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// TestWatchEventsAreReadInAnyOrder: an event's members in either order and members it does
// not know; the stream's end between events is io.EOF (the watch ended), inside one
// io.ErrUnexpectedEOF.
func TestWatchEventsAreReadInAnyOrder(t *testing.T) {
	obj := `{"metadata":{"name":"p","uid":"u"}}`
	stream := `{"type":"ADDED","object":` + obj + "}\n" + `{"object":` + obj + `,"extra":[1],"type":"DELETED"}` + "\n" + `{"type":"MODIFIED","obj`
	d := &eventDecoder[v1alpha1.Pipeline, *v1alpha1.Pipeline]{values: newValueReader(strings.NewReader(stream))}
	for _, want := range []string{"ADDED", "DELETED"} {
		ev, err := d.next()
		require.NoError(t, err)
		assert.Equal(t, want, string(ev.Type))
		assert.JSONEq(t, obj, string(ev.Object))
	}
	_, err := d.next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)

	d = &eventDecoder[v1alpha1.Pipeline, *v1alpha1.Pipeline]{values: newValueReader(strings.NewReader(`{"type":"ADDED","object":{}}` + "\n"))}
	_, err = d.next()
	require.NoError(t, err)
	_, err = d.next()
	require.ErrorIs(t, err, io.EOF)
	require.NotErrorIs(t, err, io.ErrUnexpectedEOF)
}
