package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

const fieldOwner = client.FieldOwner("database-operator")

// DatabaseReconciler keeps a Database's Deployment and Service and writes its status.
type DatabaseReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// blocker is why the children cannot be brought to the desired state.
type blocker struct{ reason, message string }

func (r *DatabaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	db := &Database{}
	if err := r.Get(ctx, req.NamespacedName, db); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !db.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	liveDeployment, liveService := &appsv1.Deployment{}, &corev1.Service{}
	deploymentFound, err := r.getCached(ctx, req, liveDeployment)
	if err != nil {
		return ctrl.Result{}, err
	}
	serviceFound, err := r.getCached(ctx, req, liveService)
	if err != nil {
		return ctrl.Result{}, err
	}

	var block *blocker
	var deployment *appsv1.Deployment
	// Published at the end, also when a write failed, as database-operator publishes its own.
	wrote := &writes{}
	defer wrote.record(r, db)
	switch {
	case deploymentFound && !controlledBy(liveDeployment, db):
		block = notOwned("Deployment", db.Name)
	case serviceFound && !controlledBy(liveService, db):
		block = notOwned("Service", db.Name)
	default:
		deployment = &appsv1.Deployment{}
		rejected, err := r.ensure(ctx, db, "Deployment", desiredDeployment(db), liveDeployment, deploymentFound, deployment, wrote)
		if err != nil {
			return ctrl.Result{}, err
		}
		if rejected != "" {
			deployment, block = nil, rejectedBlocker("Deployment", rejected)
			break
		}
		rejected, err = r.ensure(ctx, db, "Service", desiredService(db), liveService, serviceFound, &corev1.Service{}, wrote)
		if err != nil {
			return ctrl.Result{}, err
		}
		if rejected != "" {
			block = rejectedBlocker("Service", rejected)
		} else {
			block = failing(deployment)
		}
	}
	if block != nil {
		r.Recorder.Eventf(db, nil, corev1.EventTypeWarning, block.reason, "Reconcile", "%s", block.message)
	}

	status := desiredStatus(db, deployment, block, metav1.NewTime(time.Now()))
	if db.Status == nil || !equality.Semantic.DeepEqual(*db.Status, status) {
		body, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
		if err != nil {
			return ctrl.Result{}, err
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": GroupVersion.String(),
			"kind":       "Database",
			"metadata":   map[string]any{"name": db.Name, "namespace": db.Namespace},
			"status":     body,
		}}
		if err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), fieldOwner, client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing the status of Database %s: %w", req.NamespacedName, err)
		}
	}
	return ctrl.Result{}, nil
}

// getCached reads a child from the manager's cache; false when there is none.
func (r *DatabaseReconciler) getCached(ctx context.Context, req ctrl.Request, obj client.Object) (bool, error) {
	err := r.Get(ctx, req.NamespacedName, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// writes collects what one reconcile created and updated, told in one event per reason that
// names every child, as database-operator tells it: the same writes in the benchmark.
type writes struct{ created, updated []string }

func (w *writes) record(r *DatabaseReconciler, db *Database) {
	if len(w.created) > 0 {
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, "Created", "Reconcile", "created %s", strings.Join(w.created, " and "))
	}
	if len(w.updated) > 0 {
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, "Updated", "Reconcile", "updated %s to match the Database spec", strings.Join(w.updated, " and "))
	}
}

// ensure applies desired unless the cached live object already holds every field it sets,
// and notes the write in wrote. It returns the apiserver's message when it refused the child
// (400/422), and the written (or cached) object in out.
func (r *DatabaseReconciler) ensure(ctx context.Context, db *Database, kind string, desired runtime.ApplyConfiguration, live client.Object, found bool, out client.Object, wrote *writes) (string, error) {
	if found && !differs(desired, live) {
		reflect.ValueOf(out).Elem().Set(reflect.ValueOf(live).Elem())
		return "", nil
	}
	if err := r.Apply(ctx, desired, fieldOwner, client.ForceOwnership); err != nil {
		if apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
			return err.Error(), nil
		}
		return "", fmt.Errorf("writing %s %s/%s: %w", kind, db.Namespace, db.Name, err)
	}
	// Apply does not hand the written object back; the cache has it once the watch delivers it.
	if found {
		reflect.ValueOf(out).Elem().Set(reflect.ValueOf(live).Elem())
		wrote.updated = append(wrote.updated, kind+" "+db.Name)
	} else {
		wrote.created = append(wrote.created, kind+" "+db.Name)
	}
	return "", nil
}

func controlledBy(obj metav1.Object, db *Database) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == db.UID
}

// differs tells whether live lacks, or has another value for, any field desired sets.
func differs(desired, live any) bool {
	var want, have any
	if b, err := json.Marshal(desired); err != nil || json.Unmarshal(b, &want) != nil {
		return true
	}
	if b, err := json.Marshal(live); err != nil || json.Unmarshal(b, &have) != nil {
		return true
	}
	return !contains(have, want)
}

func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if v == nil {
				continue
			}
			hv, ok := h[k]
			if !ok || !contains(hv, v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

func labels(name string) map[string]string {
	return map[string]string{
		"app":                          name,
		"app.kubernetes.io/name":       "database",
		"app.kubernetes.io/instance":   name,
		"app.kubernetes.io/component":  "database",
		"app.kubernetes.io/managed-by": "database-operator",
	}
}

// deploymentLabels is labels plus, for the rollout benchmark only (hack/bench/rollout.sh), the
// label bench.example.com/rollout set to DATABASE_OPERATOR_BENCH_ROLLOUT, as database-operator
// does: a start with a new value changes every Deployment's pod template at once.
func deploymentLabels(name string) map[string]string {
	l := labels(name)
	if marker := os.Getenv("DATABASE_OPERATOR_BENCH_ROLLOUT"); marker != "" {
		l["bench.example.com/rollout"] = marker
	}
	return l
}

func ownerReference(db *Database) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(GroupVersion.String()).WithKind("Database").
		WithName(db.Name).WithUID(db.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

var sizes = map[string][4]string{ // cpu request, memory request, cpu limit, memory limit
	"small":  {"250m", "256Mi", "500m", "512Mi"},
	"medium": {"500m", "1Gi", "1", "2Gi"},
	"large":  {"1", "4Gi", "2", "8Gi"},
}

func desiredDeployment(db *Database) *appsv1ac.DeploymentApplyConfiguration {
	size := sizes[db.Spec.Size]
	resources := func(cpu, memory string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	}
	return appsv1ac.Deployment(db.Name, db.Namespace).
		WithLabels(deploymentLabels(db.Name)).
		WithOwnerReferences(ownerReference(db)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": db.Name})).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(deploymentLabels(db.Name)).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("database").
					WithImage(db.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080).WithProtocol(corev1.ProtocolTCP)).
					WithResources(corev1ac.ResourceRequirements().
						WithRequests(resources(size[0], size[1])).
						WithLimits(resources(size[2], size[3])))))))
}

func desiredService(db *Database) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(db.Name, db.Namespace).
		WithLabels(labels(db.Name)).
		WithOwnerReferences(ownerReference(db)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{"app": db.Name}).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(8080).
				WithTargetPort(intstr.FromString("http")).WithProtocol(corev1.ProtocolTCP)))
}

func notOwned(kind, name string) *blocker {
	return &blocker{"ResourceExists", fmt.Sprintf("%s %q already exists and is not managed by this Database; delete or rename it, or rename the Database", kind, name)}
}

func rejectedBlocker(kind, message string) *blocker {
	return &blocker{"InvalidSpec", fmt.Sprintf("the %s for this spec was rejected by the API server: %s; fix the Database spec", kind, message)}
}

func failing(d *appsv1.Deployment) *blocker {
	for _, c := range d.Status.Conditions {
		if (c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue) ||
			(c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded") {
			reason := c.Reason
			if reason == "" {
				reason = string(c.Type)
			}
			return &blocker{reason, "the Deployment cannot run the database: " + c.Message}
		}
	}
	return nil
}

func rolledOut(d *appsv1.Deployment) bool {
	wanted := int32(1)
	if d.Spec.Replicas != nil {
		wanted = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= wanted && d.Status.Replicas <= wanted
}

type conditionState struct {
	status          bool
	reason, message string
}

// desiredStatus follows database-operator's rules: phase Pending / Ready / Degraded and the
// conditions Ready, Progressing, Degraded, whose transition times move only when their status
// flips.
func desiredStatus(db *Database, deployment *appsv1.Deployment, block *blocker, now metav1.Time) DatabaseStatus {
	previous := db.Status
	var readyReplicas int32
	isRolledOut := false
	if deployment != nil {
		readyReplicas = deployment.Status.ReadyReplicas
		isRolledOut = rolledOut(deployment)
	}
	wasReady := false
	if previous != nil {
		switch previous.Phase {
		case "Ready":
			wasReady = true
		case "Degraded":
			for _, c := range previous.Conditions {
				wasReady = wasReady || (c.Type == "Degraded" && c.Reason == "NoReadyReplicas")
			}
		}
	}
	progressingNow := conditionState{true, "Reconciling", "the Deployment is rolling out the current spec"}
	var phase string
	var ready, progressing, degraded conditionState
	switch {
	case block != nil:
		phase = "Degraded"
		ready = conditionState{false, block.reason, block.message}
		progressing = conditionState{false, block.reason, "the operator cannot proceed until the problem is fixed"}
		degraded = conditionState{true, block.reason, block.message}
	case readyReplicas > 0 && (isRolledOut || wasReady):
		phase = "Ready"
		ready = conditionState{true, "DeploymentReady", fmt.Sprintf("%d replica(s) ready", readyReplicas)}
		progressing = progressingNow
		if isRolledOut {
			progressing = conditionState{false, "ReconcileComplete", "the Deployment and Service match the spec"}
		}
		degraded = conditionState{false, "AsExpected", "the database is running as expected"}
	case wasReady:
		phase = "Degraded"
		ready = conditionState{false, "NoReadyReplicas", "the database was ready and has no ready replica now"}
		progressing = progressingNow
		degraded = conditionState{true, "NoReadyReplicas", "the database was ready and has no ready replica now"}
	default:
		phase = "Pending"
		ready = conditionState{false, "DeploymentNotReady", "waiting for the Deployment to roll out and a replica to become ready"}
		progressing = progressingNow
		degraded = conditionState{false, "AsExpected", "nothing is wrong yet"}
	}
	condition := func(conditionType string, s conditionState) metav1.Condition {
		status := metav1.ConditionFalse
		if s.status {
			status = metav1.ConditionTrue
		}
		transition := now
		if previous != nil {
			for _, c := range previous.Conditions {
				if c.Type == conditionType && c.Status == status {
					transition = c.LastTransitionTime
				}
			}
		}
		return metav1.Condition{Type: conditionType, Status: status, Reason: s.reason, Message: s.message,
			LastTransitionTime: transition, ObservedGeneration: db.Generation}
	}
	generation := db.Generation
	return DatabaseStatus{
		ObservedGeneration: &generation,
		ReadyReplicas:      &readyReplicas,
		Phase:              phase,
		Conditions: []metav1.Condition{
			condition("Ready", ready), condition("Progressing", progressing), condition("Degraded", degraded),
		},
	}
}
