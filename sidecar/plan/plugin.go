package plan

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// Name is the plugin's name in kube-scheduler's registry and in a profile's configuration.
const Name = "PhalanxPlan"

const stateKey fwk.StateKey = Name

// Plugin places a pod on the node its plan names, checks that the planned GPUs are still free there,
// and binds it with those GPU indices.
//
//   - PreFilter narrows the cycle to the planned node (PreFilterResult), so kube-scheduler's Filter
//     plugins run on that node alone and, one node passing, no Score plugin runs ("When only one node
//     after predicate, just use it"). A pod without a plan, or whose plan's seal is not the placement
//     manager's (Seal), is turned down with the reason.
//   - Filter turns the node down when a pod there already holds a planned GPU index (a pod bound or
//     being bound since the plan was made); the release pass then plans the pod again.
//   - Bind creates the Binding with the GPU indices in its annotations, which the API server merges
//     into the pod in the same write.
type Plugin struct {
	handle  fwk.Handle
	seal    *Seal
	wait    time.Duration
	members cache.Indexer // the pod informer's store, with GangIndex
	assumed *Assumed
}

// Args are the plugin's arguments (its pluginConfig entry in the scheduler's configuration).
type Args struct {
	// KeyFile holds the plan key, the Secret the placement manager mounts too (--plan-key-file).
	KeyFile string `json:"keyFile"`
	// SealWindowSeconds is Seal.Window in seconds; DefaultSealWindowSeconds when unset.
	SealWindowSeconds int `json:"sealWindowSeconds,omitempty"`
	// PermitWaitSeconds is how long a gang's pod waits at Permit for the rest of its gang before it
	// and the gang's other waiting pods are turned back; DefaultPermitWaitSeconds when unset.
	PermitWaitSeconds int `json:"permitWaitSeconds,omitempty"`
}

// DefaultPermitWaitSeconds is scheduler-plugins' default scheduleTimeoutSeconds of a PodGroup.
const DefaultPermitWaitSeconds = 60

// DefaultSealWindowSeconds covers the webhook's timeout (5 s) and a placement manager's clock running
// behind the API server's by up to 25 s.
const DefaultSealWindowSeconds = 30

var (
	_ fwk.PreFilterPlugin   = (*Plugin)(nil)
	_ fwk.FilterPlugin      = (*Plugin)(nil)
	_ fwk.BindPlugin        = (*Plugin)(nil)
	_ fwk.ReservePlugin     = (*Plugin)(nil)
	_ fwk.PermitPlugin      = (*Plugin)(nil)
	_ fwk.EnqueueExtensions = (*Plugin)(nil)
)

// New builds the plugin from its Args; without a readable plan key the scheduler does not start, since it
// could follow no plan.
func New(_ context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args := Args{}
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return nil, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	if args.KeyFile == "" {
		return nil, fmt.Errorf("%s needs the plan key: set args.keyFile in its pluginConfig entry "+
			"(the Secret mounted in the placement manager too, docs/design/framework-sidecar.md)", Name)
	}
	window := args.SealWindowSeconds
	if window == 0 {
		window = DefaultSealWindowSeconds
	}
	if window < 0 {
		return nil, fmt.Errorf("%s args: sealWindowSeconds %d is negative", Name, window)
	}
	wait := args.PermitWaitSeconds
	if wait == 0 {
		wait = DefaultPermitWaitSeconds
	}
	if wait < 0 {
		return nil, fmt.Errorf("%s args: permitWaitSeconds %d is negative", Name, wait)
	}
	seal, err := ReadKey(args.KeyFile, time.Duration(window)*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	members, assumed, err := watchGangs(handle)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &Plugin{
		handle: handle, seal: seal, wait: time.Duration(wait) * time.Second, members: members, assumed: assumed,
	}, nil
}

// watchGangs adds GangIndex to kube-scheduler's pod informer (once, however many profiles enable the
// plugin) and keeps an Assumed set from its events, so Permit reads a gang's members in O(gang).
func watchGangs(handle fwk.Handle) (cache.Indexer, *Assumed, error) {
	informer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if _, added := informer.GetIndexer().GetIndexers()[GangIndex]; !added {
		if err := informer.AddIndexers(cache.Indexers{GangIndex: IndexGang}); err != nil {
			return nil, nil, fmt.Errorf("indexing pods by gang: %w", err)
		}
	}
	assumed := NewAssumed()
	if _, err := informer.AddEventHandler(assumed.Handler()); err != nil {
		return nil, nil, fmt.Errorf("watching gang pods: %w", err)
	}
	return informer.GetIndexer(), assumed, nil
}

// Name is the plugin's registry name.
func (p *Plugin) Name() string { return Name }

type cycle struct{ plan Plan }

func (c *cycle) Clone() fwk.StateData { return c }

// PreFilter reads the pod's plan and narrows the cycle to its node.
func (p *Plugin) PreFilter(
	_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo,
) (*fwk.PreFilterResult, *fwk.Status) {
	text, ok := pod.Annotations[Annotation]
	if !ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			"phalanx has not planned this pod: in sidecar mode a pod is placed where phalanx's release pass "+
				"plans it, and the pass plans only the pods it releases (see the pod's AdmissionWaiting events)")
	}
	planned, err := Parse(text)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("%s: %v", Annotation, err))
	}
	sealed := pod.Annotations[SealAnnotation]
	if err := p.seal.Check(pod.Namespace, pod.Name, text, sealed, pod.CreationTimestamp.Time); err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("phalanx does not follow this pod's plan %q: %v", text, err))
	}
	state.Write(stateKey, &cycle{plan: planned})
	return &fwk.PreFilterResult{NodeNames: sets.New(planned.Node)}, nil
}

// PreFilterExtensions is nil: the plan does not depend on other pods being added or removed.
func (p *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter turns the planned node down when one of the planned GPU indices is held there.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, pod *v1.Pod, node fwk.NodeInfo) *fwk.Status {
	planned, status := planOf(state)
	if status != nil {
		return status
	}
	name := node.Node().Name
	if name != planned.Node {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("phalanx planned node %s", planned.Node))
	}
	infos := node.GetPods()
	pods := make([]*v1.Pod, len(infos))
	for i, info := range infos {
		pods[i] = info.GetPod()
	}
	if index, holder, taken := Taken(planned.GPUs, pods, name, string(pod.UID)); taken {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf(
			"GPU %d that phalanx planned for this pod on node %s is held by %s; phalanx plans it again",
			index, name, holder))
	}
	return nil
}

// Reserve counts a gang's pod as placed for its gang's barrier (the plan reserved the GPUs).
func (p *Plugin) Reserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) *fwk.Status {
	if _, ok := GangOf(pod); ok {
		p.assumed.Add(pod.UID)
	}
	return nil
}

// Unreserve turns back the gang's other pods waiting at Permit when one of its pods is turned back
// (its wait timed out, or its bind failed): a gang binds whole or not at all.
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	p.assumed.Forget(pod.UID)
	gang, ok := GangOf(pod)
	if !ok {
		return
	}
	msg := fmt.Sprintf("pod %s of gang %s was turned back; its gang binds whole", pod.Name, gang.Group)
	p.handle.IterateOverWaitingPods(func(waiting fwk.WaitingPod) {
		if other := waiting.GetPod(); other.UID != pod.UID && SameGang(pod, other, gang) {
			waiting.Reject(Name, msg)
		}
	})
}

// Permit holds a gang's pod until as many of its gang's pods as the release pass planned together are
// placed (bound, or reserved here: waiting or binding), then lets them all go to Bind: members bind
// whole, as the extender's bind barrier makes them. A pod on its own passes at once. A pod that waits
// asks kube-scheduler to try its gang's turned-back members again (Unplaced), so that a gang whose
// members timed out here is not left waiting for an unrelated event.
func (p *Plugin) Permit(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	gang, ok := GangOf(pod)
	if !ok {
		return nil, 0
	}
	objs, err := p.members.ByIndex(GangIndex, GangKey(pod.Namespace, gang.Group))
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("reading gang %s: %w", gang.Group, err)), 0
	}
	members := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if member, isPod := obj.(*v1.Pod); isPod {
			members = append(members, member)
		}
	}
	placed := 1 + Placed(pod, gang, members, p.assumed.Has)
	if placed < gang.Count {
		activate(state, Unplaced(pod, gang, members, p.assumed.Has))
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("%d of the %d pods of gang %s planned together are placed",
			placed, gang.Count, gang.Group)), p.wait
	}
	p.handle.IterateOverWaitingPods(func(waiting fwk.WaitingPod) {
		if SameGang(pod, waiting.GetPod(), gang) {
			waiting.Allow(Name)
		}
	})
	return nil, 0
}

// activate asks kube-scheduler to move pods out of its unschedulable pods and backoff into its active
// queue at the end of this cycle (framework.PodsToActivate); a pod already active or in flight stays.
func activate(state fwk.CycleState, pods []*v1.Pod) {
	if len(pods) == 0 {
		return
	}
	data, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return // a cycle kube-scheduler did not give PodsToActivate (tests); nothing to ask
	}
	stash, ok := data.(*framework.PodsToActivate)
	if !ok {
		return
	}
	stash.Lock()
	defer stash.Unlock()
	for _, pod := range pods {
		stash.Map[pod.Namespace+"/"+pod.Name] = pod
	}
}

// Bind creates the pod's Binding to its planned node with the planned GPU indices.
func (p *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	planned, status := planOf(state)
	if status != nil {
		return fwk.NewStatus(fwk.Skip) // not a pod this plugin placed: the next bind plugin binds it
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if len(planned.GPUs) > 0 {
		binding.Annotations = map[string]string{GPUsAnnotation: FormatGPUs(planned.GPUs)}
	}
	err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("binding to %s with GPUs %v: %w", nodeName, planned.GPUs, err))
	}
	klog.FromContext(ctx).V(3).Info("bound as planned", "pod", klog.KObj(pod), "node", nodeName, "gpus", planned.GPUs)
	return nil
}

// EventsToRegister names what can make a turned-down pod placeable: a new plan written on it, a pod
// deleted (its GPUs freed), a node added or changed.
func (p *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Update}, QueueingHintFn: replanned},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// replanned queues a pod again when its own plan changed; other pods' updates free no GPU.
func replanned(_ klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	before, okOld := oldObj.(*v1.Pod)
	after, okNew := newObj.(*v1.Pod)
	if !okOld || !okNew {
		return fwk.Queue, nil
	}
	if after.UID != pod.UID {
		finished := after.Status.Phase == v1.PodSucceeded || after.Status.Phase == v1.PodFailed
		if finished && before.Status.Phase != after.Status.Phase {
			return fwk.Queue, nil // a pod that finished freed its GPUs
		}
		return fwk.QueueSkip, nil
	}
	if before.Annotations[Annotation] != after.Annotations[Annotation] ||
		before.Annotations[SealAnnotation] != after.Annotations[SealAnnotation] {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func planOf(state fwk.CycleState) (Plan, *fwk.Status) {
	data, err := state.Read(stateKey)
	if err != nil {
		return Plan{}, fwk.AsStatus(fmt.Errorf("reading %s's cycle state: %w", Name, err))
	}
	c, ok := data.(*cycle)
	if !ok {
		return Plan{}, fwk.AsStatus(fmt.Errorf("%s's cycle state has type %T", Name, data))
	}
	return c.plan, nil
}
