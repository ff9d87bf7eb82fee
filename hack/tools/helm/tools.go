//go:build tools

// Package tools pins the helm command hack/helm.sh builds, so `go mod tidy` keeps its whole
// dependency graph in go.sum and the build needs no checksum database.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
