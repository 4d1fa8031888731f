package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/stepwise-dev/stepwise/pkg/apis/stepwise/v1alpha1"
)

// The node phase's objects: a trigger on every Node of the cluster, suspended (it counts
// and queues them, and starts nothing), its ServiceAccount allowed to list and watch
// Nodes, and its template.
const (
	nodeTriggerName     = "bench-nodes"
	nodeTriggerTemplate = "bench-nodes"
	nodeTriggerSA       = "bench-node-trigger"
	// nodeLabel marks the benchmark's Nodes; kwok's annotation makes kwok keep them Ready
	// and heartbeat them, as a kubelet would.
	nodeLabel, nodeLabelValue = "bench-node", "yes"
	kwokNodeAnnotation        = "kwok.x-k8s.io/node"
	// nodeImages is how many images each Node lists, with two names each (a tag and a
	// digest): a kubelet reports up to 50 by default (nodeStatusMaxImages).
	nodeImages = 30
)

// nodeResult is what a trigger on many Nodes costs the operator: its RSS and Go heap
// before the Nodes exist and once the trigger has counted them all.
type nodeResult struct {
	Nodes int `json:"nodes"`
	// NodeJSONBytes is the size of one Node as the benchmark creates it.
	NodeJSONBytes int `json:"nodeJsonBytes"`
	// Baseline is the operator before the Nodes and the trigger, Loaded once the trigger's
	// status counts every Node and the operator has settled.
	BaselineRSSMiB  float64 `json:"baselineRssMiB"`
	BaselineHeapMiB float64 `json:"baselineHeapMiB"`
	LoadedRSSMiB    float64 `json:"loadedRssMiB"`
	LoadedHeapMiB   float64 `json:"loadedHeapMiB"`
	// SeenSeconds runs from the trigger's create call to its status counting every Node.
	SeenSeconds       float64  `json:"seenSeconds"`
	TriggerReconciles float64  `json:"triggerReconciles"`
	HeapTop           []string `json:"heapTop,omitempty"`
}

// nodePhase creates the Nodes, then a trigger on them, and measures what the operator's
// cache of them costs. Everything is deleted at the end.
func (b *bench) nodePhase(ctx context.Context) error {
	r := &nodeResult{Nodes: b.cfg.triggerNodes}
	b.res.Nodes = r
	baseline, err := b.probe.settle(ctx, time.Minute)
	if err != nil {
		return fmt.Errorf("node phase: %w", err)
	}
	st, err := readProcStatus(b.op.pid)
	if err != nil {
		return err
	}
	r.BaselineRSSMiB, r.BaselineHeapMiB = mib(st.RSSBytes), mib(baseline.heapBytes)
	if err := b.setUpNodeTrigger(ctx); err != nil {
		return err
	}
	logf("Nodes: creating %d Nodes with %d images each", r.Nodes, nodeImages)
	size, err := createNodes(ctx, b.cluster.Config, r.Nodes, b.cfg.creators)
	if err != nil {
		return err
	}
	r.NodeJSONBytes = size
	syncsBefore, err := b.triggerReconciles(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := b.client.StepwiseV1alpha1().PipelineTriggers(namespace).Create(ctx, nodeTrigger(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create trigger %s: %w", nodeTriggerName, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		trig, err := b.client.StepwiseV1alpha1().PipelineTriggers(namespace).Get(ctx, nodeTriggerName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return int(trig.Status.Matched) == r.Nodes, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the trigger to count %d Nodes: %w", r.Nodes, err)
	}
	r.SeenSeconds = time.Since(start).Seconds()
	loaded, err := b.probe.settle(ctx, 3*time.Minute)
	if err != nil {
		return fmt.Errorf("node phase: %w", err)
	}
	if st, err = readProcStatus(b.op.pid); err != nil {
		return err
	}
	r.LoadedRSSMiB, r.LoadedHeapMiB = mib(st.RSSBytes), mib(loaded.heapBytes)
	syncsAfter, err := b.triggerReconciles(ctx)
	if err != nil {
		return err
	}
	r.TriggerReconciles = syncsAfter - syncsBefore
	if r.HeapTop, err = b.op.heapProfile(ctx, b.profilePath("heap", "nodes"), heapTopLines); err != nil {
		return err
	}
	return b.tearDownNodeTrigger(ctx)
}

// setUpNodeTrigger creates the trigger's ServiceAccount, allowed to list and watch Nodes,
// and its template.
func (b *bench) setUpNodeTrigger(ctx context.Context) error {
	admin := b.cluster.Client
	if _, err := admin.CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: nodeTriggerSA, Namespace: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account %s: %w", nodeTriggerSA, err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: nodeTriggerSA},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create cluster role %s: %w", nodeTriggerSA, err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: nodeTriggerSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nodeTriggerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: nodeTriggerSA, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create cluster role binding %s: %w", nodeTriggerSA, err)
	}
	tmpl := &v1alpha1.PipelineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: nodeTriggerTemplate, Namespace: namespace},
		Spec: v1alpha1.PipelineTemplateSpec{
			Params: []v1alpha1.TemplateParam{{Name: "node", Required: true}, {Name: "version", Required: true}},
			Steps:  []v1alpha1.Step{{Name: "retire", Executor: "test.noop"}},
		},
	}
	if _, err := b.client.StepwiseV1alpha1().PipelineTemplates(namespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create template %s: %w", nodeTriggerTemplate, err)
	}
	return nil
}

// nodeTrigger matches every benchmark Node and binds two of its fields; suspended, it
// starts nothing and still counts and queues them.
func nodeTrigger() *v1alpha1.PipelineTrigger {
	return &v1alpha1.PipelineTrigger{
		ObjectMeta: metav1.ObjectMeta{Name: nodeTriggerName, Namespace: namespace},
		Spec: v1alpha1.PipelineTriggerSpec{
			Resource:    v1alpha1.TriggerResource{APIVersion: "v1", Kind: "Node"},
			Selector:    &v1alpha1.LabelSelector{MatchLabels: map[string]string{nodeLabel: nodeLabelValue}},
			TemplateRef: v1alpha1.TemplateRef{Name: nodeTriggerTemplate},
			Params: map[string]string{
				"node":    "$(object.metadata.name)",
				"version": "$(object.status.nodeInfo.kubeletVersion)",
			},
			ServiceAccountName: nodeTriggerSA,
			Concurrency:        50,
			Suspend:            true,
			WhenUnmatched:      v1alpha1.UnmatchedKeep,
		},
	}
}

// tearDownNodeTrigger deletes the trigger, the Nodes and the rest.
func (b *bench) tearDownNodeTrigger(ctx context.Context) error {
	sw := b.client.StepwiseV1alpha1()
	admin := b.cluster.Client
	return errors.Join(
		wrap("delete trigger", sw.PipelineTriggers(namespace).Delete(ctx, nodeTriggerName, metav1.DeleteOptions{})),
		wrap("delete nodes", deleteNodes(ctx, b.cluster.Config, b.cfg.triggerNodes, b.cfg.creators)),
		wrap("delete template", sw.PipelineTemplates(namespace).Delete(ctx, nodeTriggerTemplate, metav1.DeleteOptions{})),
		wrap("delete cluster role binding", admin.RbacV1().ClusterRoleBindings().Delete(ctx, nodeTriggerSA, metav1.DeleteOptions{})),
		wrap("delete cluster role", admin.RbacV1().ClusterRoles().Delete(ctx, nodeTriggerSA, metav1.DeleteOptions{})),
		wrap("delete service account", admin.CoreV1().ServiceAccounts(namespace).Delete(ctx, nodeTriggerSA, metav1.DeleteOptions{})),
	)
}

// deleteNodes deletes the n Nodes one by one from creators goroutines: a DeleteCollection
// of thousands of them outlasts the API server's request timeout.
func deleteNodes(ctx context.Context, base *rest.Config, n, creators int) error {
	kube, err := unthrottledClient(base)
	if err != nil {
		return err
	}
	return forEach(ctx, n, creators, func(ctx context.Context, i int) error {
		name := benchNodeName(i)
		if err := kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", name, err)
		}
		return nil
	})
}

func benchNodeName(i int) string { return fmt.Sprintf("bench-node-%05d", i) }

// benchNode is a Node as a kubelet registers and reports it: labels and annotations,
// provider ID and pod CIDR, capacity, conditions with their reasons and messages,
// addresses, node info and nodeImages images.
func benchNode(i int) *corev1.Node {
	name := benchNodeName(i)
	qty := func(s string) resource.Quantity { return resource.MustParse(s) }
	resources := corev1.ResourceList{
		corev1.ResourceCPU: qty("8"), corev1.ResourceMemory: qty("32Gi"), corev1.ResourcePods: qty("110"),
		corev1.ResourceEphemeralStorage: qty("100Gi"), "hugepages-1Gi": qty("0"), "hugepages-2Mi": qty("0"),
	}
	now := metav1.Now()
	condition := func(t corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				nodeLabel: nodeLabelValue, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.2xlarge",
				"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3),
			},
			Annotations: map[string]string{
				kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: "kwok://" + name, PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources, Phase: corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i),
				KernelVersion: "6.1.0-28-cloud-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion: "v1.37.1", OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
	for j := range nodeImages {
		repo := fmt.Sprintf("registry.example/team-%02d/service-%02d", j%7, j)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("%s@sha256:%064x", repo, j*7919+1), fmt.Sprintf("%s:v1.%d.%d", repo, j%5, j)},
			SizeBytes: int64(50_000_000 + j*1_000_000),
		})
	}
	return n
}

// createNodes creates n Nodes (their status with them, as a kubelet registers a Node) from
// creators goroutines with an unthrottled client, and returns the size of one as JSON.
func createNodes(ctx context.Context, base *rest.Config, n, creators int) (int, error) {
	kube, err := unthrottledClient(base)
	if err != nil {
		return 0, err
	}
	err = forEach(ctx, n, creators, func(ctx context.Context, i int) error {
		node := benchNode(i)
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("create nodes: %w", err)
	}
	data, err := json.Marshal(benchNode(0))
	return len(data), err
}
