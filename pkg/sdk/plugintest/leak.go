package plugintest

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stepwise-dev/stepwise/pkg/contract"
	"github.com/stepwise-dev/stepwise/pkg/sdk"
)

// Lengths below which a form of a Secret value is not looked for: shorter text turns up
// in ordinary messages (the SDK's Redactor keeps the same minimum).
const (
	minLeak = contract.MinRedactedLength
	// minEncoded is the shortest value whose encodings (base64, hex) are looked for.
	minEncoded = 8
	// minHalf is the shortest half of a value looked for on its own: a message cut in the
	// middle of a Secret shows a part of it.
	minHalf = 8
)

// leakFinder finds the values of a call's Secrets in what a hook answered, in more forms
// than the SDK removes: as they are, URL-encoded and quoted, base64 and hex encoded, as
// HTTP basic credentials, a half of a long value (a message cut mid-way), and the user
// info, path and query values of a URL. What the SDK removes never reaches a client; the
// other forms are a plugin's own leaks.
type leakFinder struct {
	forms []leakForm // longest first, so that the fullest form is named
}

// leakForm is one form of a Secret value, and what it is, for the failure message; the
// value itself is never printed.
type leakForm struct {
	text string
	what string
}

// newLeakFinder looks for the values of secrets, each named by its key.
func newLeakFinder(secrets map[string][]byte) leakFinder {
	seen := map[string]bool{}
	var f leakFinder
	for _, key := range slices.Sorted(maps.Keys(secrets)) {
		for _, form := range formsOf(string(secrets[key])) {
			if len(form.text) >= minLeak && !seen[form.text] {
				seen[form.text] = true
				f.forms = append(f.forms, leakForm{text: form.text, what: fmt.Sprintf("the value of Secret key %q, %s", key, form.what)})
			}
		}
	}
	slices.SortStableFunc(f.forms, func(a, b leakForm) int { return len(b.text) - len(a.text) })
	return f
}

// formsOf are the forms of one Secret value a hook's answer must not show.
func formsOf(raw string) []leakForm {
	v := strings.TrimSpace(raw)
	if len(v) < minLeak {
		return nil
	}
	quoted := strconv.Quote(v)
	forms := []leakForm{
		{v, "as it is"},
		{url.QueryEscape(v), "URL-encoded"},
		{url.PathEscape(v), "URL-encoded"},
		{quoted[1 : len(quoted)-1], "quoted"},
	}
	if len(v) >= minEncoded {
		forms = append(forms, encodings(v, "")...)
	}
	u, err := url.Parse(v)
	if err == nil && u.Scheme != "" && u.Host != "" {
		return append(forms, urlForms(u)...)
	}
	if len(v) >= 2*minHalf {
		half := len(v) / 2
		for half > 0 && !utf8.RuneStart(v[half]) {
			half--
		}
		forms = append(forms, leakForm{v[:half], "its first half"}, leakForm{v[half:], "its second half"})
	}
	return forms
}

// encodings are v base64 and hex encoded.
func encodings(v, of string) []leakForm {
	b := []byte(v)
	return []leakForm{
		{base64.StdEncoding.EncodeToString(b), of + "base64-encoded"},
		{base64.RawStdEncoding.EncodeToString(b), of + "base64-encoded"},
		{base64.URLEncoding.EncodeToString(b), of + "base64-encoded"},
		{base64.RawURLEncoding.EncodeToString(b), of + "base64-encoded"},
		{hex.EncodeToString(b), of + "hex-encoded"},
	}
}

// urlForms are the parts of a URL that may hold credentials, as libraries print them after
// parsing it again: not its scheme and host, which messages name.
func urlForms(u *url.URL) []leakForm {
	var forms []leakForm
	if u.User != nil {
		user := u.User.Username()
		forms = append(forms, leakForm{user, "its URL's user name"})
		if password, ok := u.User.Password(); ok {
			forms = append(forms, leakForm{password, "its URL's password"})
			forms = append(forms, encodings(user+":"+password, "its URL's user info ")...)
		}
	}
	if len(u.Path) > 1 {
		forms = append(forms, leakForm{u.Path, "its URL's path"}, leakForm{u.EscapedPath(), "its URL's path"})
	}
	if u.RawQuery != "" {
		forms = append(forms, leakForm{u.RawQuery, "its URL's query"})
		for _, values := range u.Query() {
			for _, q := range values {
				forms = append(forms, leakForm{q, "a value of its URL's query"})
			}
		}
	}
	return forms
}

// find returns a description of every Secret form in what a hook answered, naming where
// it is (the message, an output, the state, the error).
func (f leakFinder) find(res sdk.Result, err error) []string {
	type place struct{ where, text string }
	places := []place{{"the message", res.Message}}
	for _, k := range slices.Sorted(maps.Keys(res.Outputs)) {
		places = append(places, place{fmt.Sprintf("an output's key (%q)", contract.Truncate(k, 20)), k},
			place{fmt.Sprintf("output %q", contract.Truncate(k, 40)), res.Outputs[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(res.State)) {
		places = append(places, place{"a state key", k}, place{"a state value", res.State[k]})
	}
	if err != nil {
		places = append(places, place{"the error", err.Error()}, place{"the error's reason", contract.OwnReason(err)})
	}
	var found []string
	for _, p := range places {
		for _, form := range f.forms {
			if strings.Contains(p.text, form.text) {
				found = append(found, fmt.Sprintf("%s carries %s", p.where, form.what))
				break
			}
		}
	}
	return found
}

// inText names the first Secret form text shows, if any.
func (f leakFinder) inText(text string) (string, bool) {
	for _, form := range f.forms {
		if strings.Contains(text, form.text) {
			return form.what, true
		}
	}
	return "", false
}

// and looks for the forms of f and of g.
func (f leakFinder) and(g leakFinder) leakFinder {
	forms := slices.Concat(f.forms, g.forms)
	slices.SortStableFunc(forms, func(a, b leakForm) int { return len(b.text) - len(a.text) })
	return leakFinder{forms: forms}
}

// mask replaces every Secret form in text, longest first.
func (f leakFinder) mask(text string) string {
	for _, form := range f.forms {
		text = strings.ReplaceAll(text, form.text, "[secret]")
	}
	return text
}
