package client

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLineWriter(t *testing.T) {
	type line struct {
		text string
		cut  bool
	}
	var got []line
	w := NewLineWriter(func(b []byte, cut bool) { got = append(got, line{string(b), cut}) })
	for _, chunk := range []string{"first li", "ne\nsecond line\n\nthird", " line\n", "unfinished"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	assert.Equal(t, []line{{"first line", false}, {"second line", false}, {"", false}, {"third line", false}}, got)
	w.Flush()
	assert.Equal(t, line{"unfinished", false}, got[len(got)-1], "Flush hands over the rest")
	w.Flush()
	assert.Len(t, got, 5, "once")

	got = nil
	long := strings.Repeat("x", maxLine+1)
	_, err := w.Write([]byte(long))
	require.NoError(t, err)
	_, err = w.Write([]byte("end\n"))
	require.NoError(t, err)
	assert.Equal(t, []line{{long, true}, {"end", false}}, got, "a line over the bound is handed over cut")
}
