// The Database reconcile of database-operator, written the way the controller-runtime
// (kubebuilder) community writes a controller: a manager, the builder with For(Database),
// Owns(Deployment) and Owns(Service), reads from the manager's cache, server-side apply
// (client.Apply with apply configurations, field owner database-operator, ForceOwnership),
// MaxConcurrentReconciles = --workers, the client's QPS and burst from flags.
//
// A peer in database-operator's end-to-end benchmark: it writes exactly what
// database-operator writes (the same Deployment, Service, status and events), only when the
// cached object differs, so the work is equal and only the machinery differs.
package main

import (
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	var workers int
	var qps float64
	var burst int
	var metricsAddr, probeAddr string
	flag.IntVar(&workers, "workers", 2, "Databases reconciled in parallel (MaxConcurrentReconciles).")
	flag.Float64Var(&qps, "kube-api-qps", 20, "Client-side QPS to the Kubernetes API.")
	flag.IntVar(&burst, "kube-api-burst", 30, "Client-side burst to the Kubernetes API.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "The address the probe endpoint binds to; 0 disables it.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := AddToScheme(scheme); err != nil {
		panic(err)
	}

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// Nothing here reads managedFields: keep them out of the cache (the memory advice of
		// cache.Options.DefaultTransform).
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		log.Error(err, "unable to create the manager")
		os.Exit(1)
	}
	reconciler := &DatabaseReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("example.com/database-operator"),
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&Database{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("database").
		Complete(reconciler)
	if err != nil {
		log.Error(err, "unable to create the controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up the health check")
		os.Exit(1)
	}
	log.Info("starting the manager", "workers", workers, "qps", qps, "burst", burst)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running the manager")
		os.Exit(1)
	}
}
