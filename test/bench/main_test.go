package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSizingGoMemLimit(t *testing.T) {
	for pipelines, want := range map[int]string{
		0:       "28MiB",
		10000:   "59MiB",
		100000:  "340MiB",
		1000000: "3153MiB",
	} {
		assert.Equal(t, want, sizingGoMemLimit(pipelines), "%d pipelines", pipelines)
	}
}
