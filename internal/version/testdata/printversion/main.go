// Command printversion prints version.Version, for TestLinkerSetsVersion.
package main

import (
	"fmt"

	"github.com/stepwise-dev/stepwise/internal/version"
)

func main() { fmt.Println(version.Version) }
