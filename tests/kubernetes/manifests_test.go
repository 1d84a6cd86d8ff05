package kubernetes

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "sigs.k8s.io/yaml"
)

const deployDir = "../../deploy"

// TestKubernetesManifestsMatchTheAPITypes decodes every document in
// deploy/kubernetes strictly into the Kubernetes API type of its kind, so
// that a misspelt or misplaced field, or a value of the wrong type, fails
// here rather than at kubectl apply. It is the offline part of a schema
// check: what only the API server validates (names, ranges, references) is
// not covered.
func TestKubernetesManifestsMatchTheAPITypes(t *testing.T) {
	types := map[string]func() any{
		"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
		"v1/Secret":                     func() any { return &corev1.Secret{} },
		"v1/Service":                    func() any { return &corev1.Service{} },
		"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
		"apps/v1/StatefulSet":           func() any { return &appsv1.StatefulSet{} },
		"batch/v1/Job":                  func() any { return &batchv1.Job{} },
		"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.y*ml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var node yaml.Node
			if err := dec.Decode(&node); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			doc, err := yaml.Marshal(&node)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := k8syaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			newObj, ok := types[head.APIVersion+"/"+head.Kind]
			if !ok {
				t.Errorf("%s document %d: %s %s: add its API type to this test", f, i, head.APIVersion, head.Kind)
				continue
			}
			if err := k8syaml.UnmarshalStrict(doc, newObj()); err != nil {
				t.Errorf("%s document %d (%s): %v", f, i, head.Kind, err)
			}
		}
	}
}
