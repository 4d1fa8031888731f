package lenient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// valueReader reads a stream of JSON one value at a time, finding where each value ends
// without decoding it. encoding/json's Decoder scans a value twice before a RawMessage
// holds it, and the object's decoder scans it twice more; here the bytes are scanned once
// before the decoder, which validates them (a list of 100,000 pipelines: a third of the
// CPU of a restart's list). It reads what the API server writes, so it only needs to find
// the ends of valid JSON; what is not valid is the decoder's error.
type valueReader struct {
	r       *bufio.Reader
	scratch []byte
}

func newValueReader(r io.Reader) *valueReader {
	return &valueReader{r: bufio.NewReaderSize(r, 64<<10)}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// peek returns the next byte that is not white space without consuming it; io.EOF when
// the stream ends first.
func (v *valueReader) peek() (byte, error) {
	for {
		c, err := v.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if !isSpace(c) {
			return c, v.r.UnreadByte()
		}
	}
}

// delim consumes the delimiter want ({ } [ ] :), after white space.
func (v *valueReader) delim(want byte) error {
	c, err := v.peek()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("want %q, got %q", want, c)
	}
	_, _ = v.r.ReadByte()
	return nil
}

// more reports whether another member or element follows in the object or array being
// read (end is its closing delimiter, left for the caller), consuming the comma before it.
func (v *valueReader) more(first bool, end byte) (bool, error) {
	c, err := v.peek()
	if err != nil {
		return false, unexpected(err)
	}
	if c == end {
		return false, nil
	}
	if first {
		return true, nil
	}
	if err := v.delim(','); err != nil {
		return false, err
	}
	return true, nil
}

// key reads an object member's name and the colon after it.
func (v *valueReader) key() (string, error) {
	raw, err := v.value()
	if err != nil {
		return "", err
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return "", fmt.Errorf("member name: %w", err)
	}
	return name, unexpected(v.delim(':'))
}

// value returns the next value's bytes, in a slice of its own.
func (v *valueReader) value() ([]byte, error) {
	c, err := v.peek()
	if err != nil {
		return nil, unexpected(err)
	}
	v.scratch = v.scratch[:0]
	switch c {
	case '{', '[', '"':
		err = v.compound()
	default: // a number, true, false or null: up to what cannot be part of one
		for {
			c, err = v.r.ReadByte()
			if errors.Is(err, io.EOF) && len(v.scratch) > 0 {
				err = nil
				break
			}
			if err != nil {
				break
			}
			if isSpace(c) || strings.IndexByte(`,:]}[{"`, c) >= 0 {
				err = v.r.UnreadByte()
				break
			}
			v.scratch = append(v.scratch, c)
		}
	}
	if err != nil {
		return nil, unexpected(err)
	}
	return bytes.Clone(v.scratch), nil
}

// compound reads an object, an array or a string into scratch: up to the bracket that
// closes the first one, outside strings. It scans what the reader holds a chunk at a time.
func (v *valueReader) compound() error {
	depth, inString, escaped := 0, false, false
	for {
		if v.r.Buffered() == 0 {
			if _, err := v.r.Peek(1); err != nil {
				return err
			}
		}
		chunk, _ := v.r.Peek(v.r.Buffered())
		end := -1
		for i, c := range chunk {
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
					if depth == 0 {
						end = i // the value was a string
					}
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				if depth == 0 {
					end = i
				}
			}
			if end >= 0 {
				break
			}
		}
		if end >= 0 {
			v.scratch = append(v.scratch, chunk[:end+1]...)
			_, err := v.r.Discard(end + 1)
			return err
		}
		v.scratch = append(v.scratch, chunk...)
		if _, err := v.r.Discard(len(chunk)); err != nil {
			return err
		}
	}
}

// unexpected turns the end of the stream inside a value into io.ErrUnexpectedEOF, as
// encoding/json does: only the end between values is a clean one.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
