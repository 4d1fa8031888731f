package contract

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CheckParams checks a step's parameters against its executor's declarations before any
// hook runs: every required parameter is set, every value has its type (an enum one of its
// values), and, when the declarations are complete (every one typed), no other parameter
// is set. An empty value of a parameter that is not a string counts as not set (a
// template's optional parameter passed on as $(params.x)), and an empty value of a required
// one is missing. It returns the parameters with
// the defaults of those not set. The error is a permanent InvalidParameter naming the
// parameter; the engine and the SDK give the same.
func CheckParams(decl []Parameter, params map[string]string) (map[string]string, error) {
	for _, p := range decl {
		if v, set := params[p.Name]; set && v == "" && p.Type != "" && p.Type != ParamString {
			params = maps.Clone(params)
			delete(params, p.Name)
		}
	}
	out := WithDefaults(decl, params)
	complete := len(decl) > 0
	declared := make(map[string]bool, len(decl))
	for _, p := range decl {
		declared[p.Name] = true
		complete = complete && p.Type != ""
		v, set := out[p.Name]
		if !set || (p.Required && v == "") { // a required string is not given by ""
			if p.Required {
				return nil, invalidParameter(p.Name, errors.New("is required"))
			}
			continue
		}
		if err := checkValue(p, v); err != nil {
			return nil, invalidParameter(p.Name, err)
		}
	}
	if complete {
		for _, name := range slices.Sorted(maps.Keys(out)) {
			if !declared[name] {
				names := make([]string, 0, len(decl))
				for _, p := range decl {
					names = append(names, p.Name)
				}
				return nil, invalidParameter(name, fmt.Errorf("is not a parameter of the executor, which takes %s", strings.Join(names, ", ")))
			}
		}
	}
	return out, nil
}

// WithDefaults returns params with the default of every declared parameter not set; params
// itself when there is none to add.
func WithDefaults(decl []Parameter, params map[string]string) map[string]string {
	out := params
	for _, p := range decl {
		if _, set := params[p.Name]; !set && p.Default != "" {
			if len(out) == len(params) {
				out = maps.Clone(params)
				if out == nil {
					out = map[string]string{}
				}
			}
			out[p.Name] = p.Default
		}
	}
	return out
}

// invalidParameter is the permanent error of a parameter, in the one shape every
// executor's step shows: parameter "NAME" WHAT.
func invalidParameter(name string, err error) error {
	return Permanent(ReasonInvalidParameter, fmt.Errorf("parameter %q %w", name, err))
}

// checkValue checks v against p's type.
func checkValue(p Parameter, v string) error {
	switch p.Type {
	case ParamInt:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("is %q, not a whole number", v)
		}
	case ParamBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("is %q, not true or false", v)
		}
	case ParamDuration:
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("is %q, not a duration such as 90s or 10m", v)
		}
	case ParamURL:
		if _, err := parseHTTPURL(v); err != nil {
			return err
		}
	case ParamEnum:
		if !slices.Contains(p.Values, v) {
			return fmt.Errorf("is %q, not one of %s", v, strings.Join(p.Values, ", "))
		}
	}
	return nil
}

// parseHTTPURL parses an absolute http or https URL. Its error does not repeat the value,
// which may hold credentials.
func parseHTTPURL(v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("is not an absolute http or https URL")
	}
	return u, nil
}

// The accessors read a parameter that CheckParams checked, so they do not fail: a value
// that is not set, or not of the type, reads as the type's zero value.

// String is the parameter's value.
func (r *Request) String(name string) string { return r.Params[name] }

// Int is the value of an int parameter.
func (r *Request) Int(name string) int64 {
	n, _ := strconv.ParseInt(r.Params[name], 10, 64)
	return n
}

// Bool is the value of a bool parameter.
func (r *Request) Bool(name string) bool {
	b, _ := strconv.ParseBool(r.Params[name])
	return b
}

// Duration is the value of a duration parameter.
func (r *Request) Duration(name string) time.Duration {
	d, _ := time.ParseDuration(r.Params[name])
	return d
}

// URL is the value of a url parameter; nil when it is not set.
func (r *Request) URL(name string) *url.URL {
	u, err := parseHTTPURL(r.Params[name])
	if err != nil {
		return nil
	}
	return u
}

// Secret is the data of the Secret that the secret parameter name names, by key; nil when
// the parameter is not set.
func (r *Request) Secret(name string) map[string][]byte { return r.SecretParams[name] }
