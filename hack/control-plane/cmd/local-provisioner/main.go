// Command local-provisioner gives the local control plane's claims volumes that a real pod
// can write, as a cloud's storage driver would, for planes with a real node
// (hack/control-plane.sh, NODES=real).
//
// kube-controller-manager's built-in host-path provisioner makes root-owned 0750 directories,
// and the kubelet applies no fsGroup to hostPath volumes, so a database running as uid 999
// cannot write them. This provisioner makes `local` PersistentVolumes instead: the kubelet
// gives a local volume to the pod's fsGroup on its first mount, as it does for a cloud disk.
//
// For each claim of a StorageClass whose provisioner is --name, once the scheduler has picked
// a node (volumeBindingMode WaitForFirstConsumer: the annotation
// volume.kubernetes.io/selected-node), it creates a directory under --dir and a PV bound to
// the claim, with the node as its only topology. The node may be a kwok node: nothing mounts
// that volume, and the claim binds as it would on a cloud. When a released PV's reclaim
// policy is Delete, it removes the directory and the PV. When a claim asks for more than its
// PV holds, it grows the PV and reports the new capacity on the claim, as an external
// resizer does (a directory has no size to grow; the capacity is what the claim asked).
//
// One worker over a rate-limited work queue fed by shared informers: the sample-controller's
// shape, small enough to read in one sitting.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const (
	selectedNode  = "volume.kubernetes.io/selected-node"
	provisionedBy = "pv.kubernetes.io/provisioned-by"
	hostnameLabel = "kubernetes.io/hostname"
)

type provisioner struct {
	name    string
	dir     string
	client  kubernetes.Interface
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	nodes   corelisters.NodeLister
	classes storagelisters.StorageClassLister
	queue   workqueue.TypedRateLimitingInterface[string]
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig to reach the apiserver with")
	name := flag.String("name", "", "the provisioner name StorageClasses name")
	dir := flag.String("dir", "", "where the volumes' directories are made")
	flag.Parse()
	if *kubeconfig == "" || *name == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: local-provisioner --kubeconfig FILE --name NAME --dir DIR")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(config)
	factory := informers.NewSharedInformerFactory(client, 0)
	p := &provisioner{
		name:    *name,
		dir:     *dir,
		client:  client,
		claims:  factory.Core().V1().PersistentVolumeClaims().Lister(),
		volumes: factory.Core().V1().PersistentVolumes().Lister(),
		nodes:   factory.Core().V1().Nodes().Lister(),
		classes: factory.Storage().V1().StorageClasses().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "local-provisioner"}),
	}
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				p.queue.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	if _, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(enqueue("claim/")); err != nil {
		klog.Fatal(err)
	}
	if _, err := factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(enqueue("volume/")); err != nil {
		klog.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Every lister above registered its informer, so one Start runs them all.
	factory.Start(ctx.Done())
	for typ, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			klog.Fatalf("cache of %v did not sync", typ)
		}
	}
	klog.Infof("local-provisioner %q: volumes under %s", p.name, p.dir)
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for p.next(ctx) {
	}
}

// next processes one key: get, handle, forget or retry later, done.
func (p *provisioner) next(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	var err error
	if rest, ok := strings.CutPrefix(key, "claim/"); ok {
		err = p.syncClaim(ctx, rest)
	} else if rest, ok := strings.CutPrefix(key, "volume/"); ok {
		err = p.syncVolume(ctx, rest)
	}
	if err != nil {
		klog.Errorf("%s: %v (retrying)", key, err)
		p.queue.AddRateLimited(key)
		return true
	}
	p.queue.Forget(key)
	return true
}

func (p *provisioner) syncClaim(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := p.claims.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) || claim.DeletionTimestamp != nil {
		return nil
	} else if err != nil {
		return err
	}
	if claim.Spec.StorageClassName == nil {
		return nil
	}
	class, err := p.classes.Get(*claim.Spec.StorageClassName)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if class.Provisioner != p.name {
		return nil
	}
	if claim.Spec.VolumeName != "" {
		return p.resize(ctx, claim)
	}
	node := claim.Annotations[selectedNode]
	if node == "" {
		// Immediate binding would have to guess a node; this class waits for the scheduler.
		return nil
	}
	return p.provision(ctx, claim, class, node)
}

func (p *provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node string) error {
	hostname := node
	if n, err := p.nodes.Get(node); err == nil && n.Labels[hostnameLabel] != "" {
		hostname = n.Labels[hostnameLabel]
	}
	path := filepath.Join(p.dir, string(claim.UID))
	// Root-owned and private until the kubelet hands it to the pod's fsGroup at its first mount.
	if err := os.MkdirAll(path, 0o700); err != nil {
		return err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pvc-" + string(claim.UID),
			Annotations: map[string]string{provisionedBy: p.name},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes: claim.Spec.AccessModes,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname},
				}},
			}}}},
		},
	}
	_, err := p.client.CoreV1().PersistentVolumes().Create(ctx, volume, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		klog.Infof("provisioned %s for claim %s/%s on node %s", volume.Name, claim.Namespace, claim.Name, node)
	}
	return err
}

// resize grows the PV of a bound claim that asks for more, then reports the capacity on the
// claim's status, as an external resizer does for a volume that needs no file system resize.
func (p *provisioner) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	volume, err := p.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if volume.Annotations[provisionedBy] != p.name || claim.Status.Phase != corev1.ClaimBound {
		return nil
	}
	wanted := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if held := volume.Spec.Capacity[corev1.ResourceStorage]; held.Cmp(wanted) < 0 {
		volume = volume.DeepCopy()
		volume.Spec.Capacity[corev1.ResourceStorage] = wanted
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, volume, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.Infof("grew %s to %s for claim %s/%s", volume.Name, wanted.String(), claim.Namespace, claim.Name)
	}
	if reported := claim.Status.Capacity[corev1.ResourceStorage]; reported.Cmp(wanted) >= 0 {
		return nil
	}
	claim = claim.DeepCopy()
	if claim.Status.Capacity == nil {
		claim.Status.Capacity = corev1.ResourceList{}
	}
	claim.Status.Capacity[corev1.ResourceStorage] = wanted
	claim.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: wanted}
	claim.Status.AllocatedResourceStatuses = nil
	claim.Status.Conditions = nil
	_, err = p.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	return err
}

// syncVolume removes a released volume of ours whose reclaim policy is Delete.
func (p *provisioner) syncVolume(ctx context.Context, name string) error {
	volume, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if volume.Annotations[provisionedBy] != p.name || volume.Status.Phase != corev1.VolumeReleased ||
		volume.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || volume.Spec.Local == nil {
		return nil
	}
	path := volume.Spec.Local.Path
	if filepath.Dir(path) != filepath.Clean(p.dir) {
		return fmt.Errorf("refusing to remove %s: not a volume directory under %s", path, p.dir)
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &volume.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		klog.Infof("deleted %s and %s", name, path)
	}
	return err
}
