// Package crd holds the Pipeline CustomResourceDefinition generated from pkg/apis by
// controller-gen (hack/update-crd.sh), and the tests that run its validation rules.
package crd
