// Package node holds the built-in executors that retire a node: node.cordon, node.drain
// and node.delete.
package node

import _ "k8s.io/kubectl/pkg/drain" // placeholder until drain.go lands
