package contract

import (
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Redacted replaces a secret value in what a hook returns.
const Redacted = "[redacted]"

// MinRedactedLength is the shortest secret value a Redactor removes: a shorter one is no
// credential, and removing every "a" or "1" would make messages unreadable.
const MinRedactedLength = 4

// Redactor removes the values of a call's Secrets from what the hook returns: its message,
// outputs, state and error text. The SDK applies it in the plugin, the engine to every
// executor; a hook that returns net/http's error for a URL kept in a Secret
// (`Post "https://hooks.example.com/T0/B1/xyz?token=abc": dial tcp ...`) leaks nothing.
//
// Each value is removed as it is, and as URL encoding would show it; a value that is a URL
// also has its user info, path and query values removed on their own, as libraries print a
// URL after parsing it again.
type Redactor struct {
	values []string // longest first, so that a value that holds another goes whole
}

// NewRedactor is the Redactor of the given Secret data.
func NewRedactor(secrets ...map[string][]byte) Redactor {
	seen := map[string]bool{}
	add := func(v string) {
		if len(v) >= MinRedactedLength {
			seen[v] = true
		}
	}
	for _, s := range secrets {
		for _, data := range s {
			v := strings.TrimSpace(string(data))
			for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
				add(form)
			}
			if u, err := url.Parse(v); err == nil && u.Host != "" {
				add(u.String())
				add(u.Redacted())
				if p, ok := u.User.Password(); ok {
					add(p)
				}
				add(u.User.Username())
				if len(u.Path) > 1 {
					add(u.Path)
					add(u.EscapedPath())
				}
				add(u.RawQuery)
				for _, vs := range u.Query() {
					for _, q := range vs {
						add(q)
					}
				}
			}
		}
	}
	values := slices.Collect(maps.Keys(seen))
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	return Redactor{values: values}
}

// Empty tells whether the Redactor removes nothing.
func (r Redactor) Empty() bool { return len(r.values) == 0 }

// String returns s without any secret value.
func (r Redactor) String(s string) string {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// Map returns m with no secret value in its keys or values; m itself when it has none.
func (r Redactor) Map(m map[string]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		rk, rv := r.String(k), r.String(v)
		if rk != k || rv != v {
			if out == nil {
				out = maps.Clone(m)
			}
			delete(out, k)
			out[rk] = rv
		}
	}
	if out == nil {
		return m
	}
	return out
}

// Result returns res without any secret value.
func (r Redactor) Result(res Result) Result {
	if r.Empty() {
		return res
	}
	res.Message = r.String(res.Message)
	res.Outputs = r.Map(res.Outputs)
	res.State = r.Map(res.State)
	res.Created = r.Map(res.Created)
	if res.BlockedBy != nil {
		blockers := make([]Blocker, len(res.BlockedBy))
		for i, b := range res.BlockedBy {
			blockers[i] = Blocker{Kind: r.String(b.Kind), Namespace: r.String(b.Namespace), Name: r.String(b.Name)}
		}
		res.BlockedBy = blockers
	}
	return res
}

// Plan returns p without any secret value.
func (r Redactor) Plan(p Plan) Plan {
	if r.Empty() {
		return p
	}
	p.Summary = r.String(p.Summary)
	details := make([]PlanItem, len(p.Details))
	for i, d := range p.Details {
		details[i] = PlanItem{Kind: r.String(d.Kind), Name: r.String(d.Name), Action: r.String(d.Action), Note: r.String(d.Note)}
	}
	if p.Details != nil {
		p.Details = details
	}
	if p.Warnings != nil {
		warnings := make([]string, len(p.Warnings))
		for i, w := range p.Warnings {
			warnings[i] = r.String(w)
		}
		p.Warnings = warnings
	}
	p.Outputs = r.Map(p.Outputs)
	return p
}

// Error returns err without any secret value in its text, keeping its reason and whether
// it is permanent (what the engine reads of it); err itself when its text has none.
func (r Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	text := err.Error()
	clean := r.String(text)
	var e *Error
	hasOwn := errors.As(err, &e)
	reason := OwnReason(err)
	if clean == text && r.String(reason) == reason {
		return err
	}
	cause := errors.New(clean)
	switch {
	case IsPermanent(err):
		return Permanent(r.String(reason), cause)
	case hasOwn:
		return Retryable(r.String(reason), cause)
	default:
		return cause
	}
}

// Redactor is the Redactor of every Secret given to the call: those merged by key and those
// by parameter (merged by key, two Secrets' values of one key are one).
func (r *Request) Redactor() Redactor {
	secrets := make([]map[string][]byte, 0, 1+len(r.SecretParams))
	secrets = append(secrets, r.Secrets)
	for _, data := range r.SecretParams {
		secrets = append(secrets, data)
	}
	return NewRedactor(secrets...)
}
