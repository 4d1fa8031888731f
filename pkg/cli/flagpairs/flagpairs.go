// Package flagpairs reads the NAME=VALUE pairs that repeated flags give (-p, --state), the
// same for every command of kubectl-stepwise.
package flagpairs

import (
	"fmt"
	"strings"
)

// Parse reads NAME=VALUE pairs of what the errors call what ("parameter"); a name given
// twice is an error.
func Parse(what string, pairs []string) (map[string]string, error) {
	params := make(map[string]string, len(pairs))
	for _, pair := range pairs {
		name, value, ok := strings.Cut(pair, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%s %q is not NAME=VALUE", what, pair)
		}
		if _, dup := params[name]; dup {
			return nil, fmt.Errorf("%s %s is given twice", what, name)
		}
		params[name] = value
	}
	return params, nil
}
