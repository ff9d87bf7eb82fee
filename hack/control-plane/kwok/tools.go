//go:build tools

// Package tools pins kwok's command so `go mod tidy` keeps its dependency graph in go.sum.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
