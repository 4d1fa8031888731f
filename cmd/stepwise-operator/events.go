package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/stepwise-dev/stepwise/pkg/controller"
	stepwisescheme "github.com/stepwise-dev/stepwise/pkg/generated/clientset/versioned/scheme"
)

// newRecorder returns an Event recorder writing through kube, and its broadcaster (whose
// Shutdown stops it; the archive watches it too). Events name our objects, so the recorder's scheme must know our types; a scheme of
// our own avoids changing client-go's global one.
func newRecorder(ctx context.Context, kube kubernetes.Interface) (record.EventRecorder, record.EventBroadcaster) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(stepwisescheme.AddToScheme(scheme))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	hostname, _ := os.Hostname()
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: controller.ControllerName, Host: hostname}), broadcaster
}
