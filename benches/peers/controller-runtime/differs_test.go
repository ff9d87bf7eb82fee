package main

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A child that the apiserver returns for our apply (server-set fields added) does not differ;
// one with another image does.
func TestAnAppliedChildDoesNotDiffer(t *testing.T) {
	db := &Database{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid-1"},
		Spec: DatabaseSpec{Size: "small", Image: "postgres:17"}}
	for _, c := range []struct {
		desired any
		live    interface{ GetName() string }
	}{
		{desiredDeployment(db), &appsv1.Deployment{}},
		{desiredService(db), &corev1.Service{}},
	} {
		b, _ := json.Marshal(c.desired)
		if err := json.Unmarshal(b, c.live); err != nil {
			t.Fatal(err)
		}
		switch live := c.live.(type) {
		case *appsv1.Deployment:
			live.ResourceVersion, live.Generation = "42", 1
			live.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
			live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
			live.Status.Replicas = 1
		case *corev1.Service:
			live.Spec.ClusterIP = "10.0.0.7"
			live.Spec.Type = corev1.ServiceTypeClusterIP
		}
		if differs(c.desired, c.live) {
			t.Errorf("%T differs from its own apply", c.live)
		}
	}
	other := *db
	other.Spec.Image = "postgres:18"
	live := &appsv1.Deployment{}
	b, _ := json.Marshal(desiredDeployment(db))
	_ = json.Unmarshal(b, live)
	if !differs(desiredDeployment(&other), live) {
		t.Error("a changed image is not seen")
	}
}
