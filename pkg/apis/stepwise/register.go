// Package stepwise holds the name of the API group shared by all its versions.
package stepwise

// GroupName is the API group of every Stepwise resource.
const GroupName = "stepwise.dev"
