// Package kubernetes holds the test that decodes every manifest under
// deploy/kubernetes strictly into its Kubernetes API type. It is in a module
// of its own (tests/) so that an application requiring
// github.com/sendtwice/sendtwice does not require k8s.io. It has no code of
// its own.
//
// It must never be imported by a production package, and never import
// anything but the standard library.
package kubernetes
