package egress

import (
	"net/url"
	"regexp"
	"strings"
)

// urlInText finds the URLs an error's text quotes: in double quotes, up to the closing
// quote (net/http's `Post "https://admin:***@keystone:5000/v3/auth/tokens?x=y": dial
// tcp ...`, net/url's `parse "http://admin:pass word@host/": invalid userinfo`), or bare,
// up to a space.
var urlInText = regexp.MustCompile(`"[A-Za-z][A-Za-z0-9+.-]*://(?:[^"\\]|\\.)*"|[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\x60]+`)

// RedactURL is raw as a message may show it: without user info, query or fragment, which
// may carry credentials (https://admin:Sup3rS3cret@keystone:5000/v3?token=... becomes
// https://keystone:5000/v3). It never fails: a URL that does not parse (a password with a
// slash pasted as it is) loses everything up to its last @ and from its first ? or #.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Opaque == "" { // not user:password@host read as scheme:opaque
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		return u.String()
	}
	scheme, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		// A malformed URL: where its user info ends is a guess, and a wrong guess must
		// not show a part of a password.
		rest = rest[i+1:]
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, _, _ = strings.Cut(rest, "?")
	return scheme + rest
}

// RedactError returns err with every URL its text quotes passed through RedactURL, for the
// errors of HTTP libraries, which quote the URL they requested (net/http masks only the
// password, and keeps the query). The result wraps err: errors.Is and errors.As see what
// err holds.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	redacted := urlInText.ReplaceAllStringFunc(text, redactInText)
	if redacted == text {
		return err
	}
	return &redactedError{text: redacted, err: err}
}

// redactInText redacts a URL found in a text, keeping its quotes, and leaving the
// punctuation after a bare one (the "]," of gophercloud's "[POST https://...], but got
// 401") out of the URL.
func redactInText(match string) string {
	if len(match) >= 2 && match[0] == '"' {
		return `"` + RedactURL(match[1:len(match)-1]) + `"`
	}
	end := len(match)
	for end > 0 && strings.ContainsRune(".,;:)]", rune(match[end-1])) {
		if match[end-1] == ']' && strings.Count(match[:end], "[") >= strings.Count(match[:end], "]") {
			break // the end of an IPv6 host: http://[::1]
		}
		end--
	}
	return RedactURL(match[:end]) + match[end:]
}

type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
