// Package deploy holds what it takes to run the gateway somewhere else than
// a developer's machine: the container image's files (image/) and the
// Kubernetes manifests (kubernetes/). It is a module of its own so that the
// kustomize library its tests render the manifests with stays out of the
// gateway's dependencies; its tests check the manifests against the
// configuration they mount, read by the gateway's own config package, and
// inspect the image `make image` builds.
package deploy
