// Command marker stands for a plugin image re-pushed under a trusted tag with other code:
// whenever it runs, in any container, it prints the marker the node test looks for in
// every log, and fails.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Println("stepwise-e2e: the re-pushed image's code ran")
	os.Exit(1)
}
