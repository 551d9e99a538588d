// Package deploy holds no product code: it is the module of the tests that
// validate the deployment files beside it (kustomize overlays, compose
// file, Grafana dashboard, Prometheus rules) offline. It is a module of
// its own so that kustomize's and Kubernetes' Go packages, which only
// these tests need, stay out of the product's go.mod and out of the
// product's build.
package deploy
