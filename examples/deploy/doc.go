// Package deploy holds the Kubernetes manifests, Dockerfiles and
// docker-compose.yml of drainkit's example services; its test checks their
// timing arithmetic and ports (see README.md).
package deploy
