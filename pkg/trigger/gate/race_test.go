//go:build race

package gate

// raceDetector tells tests that the race detector runs: cel-go's cost tracking is about
// twenty times slower under it.
const raceDetector = true
