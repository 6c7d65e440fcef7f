// Command devicemanager runs the kubelet's own device manager (k8s.io/kubernetes v1.36.3,
// pkg/kubelet/cm/devicemanager) for one simulated node of the test bed, without containers.
//
// It is the part of a kubelet that decides which devices a container gets: device plugins register
// on <root>/device-plugins/kubelet.sock exactly as on a real node, and each pod the simulated
// kubelet hands to it is admitted the way the kubelet's HandlePodAdditions does it: added to the pod
// manager, then Allocate(pod, container) for every init and app container in order, one pod at a time.
// The PodResources v1 API (List, Get, GetAllocatableResources) is served on
// <root>/pod-resources/kubelet.sock by the kubelet's own server code over what the manager holds.
//
// The simulated kubelet (testbed/device_manager.py) drives it over HTTP on <root>/control.sock:
//
//	POST /admit     a v1 Pod (JSON)  -> {"admitted": true, "containers": [...], "containerStatuses": [...]}
//	                                    or {"admitted": false, "reason": ..., "message": ...}
//	POST /remove    {"uid": "..."}   -> the pod is no longer active; its devices are freed
//	GET  /capacity                   -> the nvidia.com/gpu (and other) capacity and allocatable
//	GET  /statuses                   -> allocatedResourcesStatus of every admitted pod's containers
//
// The exported constructor (NewManagerImpl) hard-codes /var/lib/kubelet/device-plugins, so parallel
// test beds would share one socket directory; the unexported constructor that takes the socket path
// is reached with go:linkname (the build passes -ldflags=-checklinkname=0, which Go 1.23+ needs to
// allow a pull linkname into another module's package).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	_ "unsafe" // go:linkname

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
	"k8s.io/kubernetes/pkg/kubelet/cm/admission"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []cadvisorapi.Node, store topologymanager.Store) (*devicemanager.ManagerImpl, error)

func main() {
	klog.InitFlags(nil)
	root := flag.String("root", "", "directory of this node's kubelet sockets (device-plugins/, pod-resources/, control.sock)")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "devicemanager: --root is required")
		os.Exit(2)
	}
	if err := run(*root); err != nil {
		fmt.Fprintf(os.Stderr, "devicemanager: %v\n", err)
		os.Exit(1)
	}
}

func run(root string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.FromContext(ctx)
	for _, dir := range []string{"device-plugins", "pod-resources"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o750); err != nil {
			return err
		}
	}
	pods := newPodManager()
	manager, err := newManagerImpl(logger, filepath.Join(root, "device-plugins", "kubelet.sock"), nil, noHints{})
	if err != nil {
		return fmt.Errorf("creating the device manager: %w", err)
	}
	if err := manager.Start(logger, pods.GetActivePods, allReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return fmt.Errorf("starting the device manager: %w", err)
	}
	defer func() { _ = manager.Stop(logger) }()

	resources, err := servePodResources(ctx, filepath.Join(root, "pod-resources", "kubelet.sock"), pods, manager)
	if err != nil {
		return err
	}
	defer resources.Stop()

	h := &harness{manager: manager, pods: pods}
	control, err := listenUnix(filepath.Join(root, "control.sock"))
	if err != nil {
		return err
	}
	server := &http.Server{Handler: h.routes()}
	go func() {
		<-ctx.Done()
		_ = server.Close()
	}()
	logger.Info("device manager ready", "root", root)
	if err := server.Serve(control); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listenUnix listens on a Unix socket, replacing a stale socket file left by an earlier run.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return net.Listen("unix", path)
}

// servePodResources serves PodResources v1 with the kubelet's own server and its rate limit.
func servePodResources(ctx context.Context, path string, pods *podManager, m *devicemanager.ManagerImpl) (*grpc.Server, error) {
	providers := podresources.PodResourcesProviders{
		Pods:             pods,
		Devices:          devicesProvider{m},
		Cpus:             noCPUs{},
		Memory:           noMemory{},
		DynamicResources: noClaims{},
	}
	server := grpc.NewServer(apisgrpc.WithRateLimiter(ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens))
	podresourcesv1.RegisterPodResourcesListerServer(server, podresources.NewV1PodResourcesServer(ctx, providers))
	listener, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	go func() { _ = server.Serve(listener) }()
	return server, nil
}

// harness admits pods one at a time, as the kubelet's pod admission does.
type harness struct {
	admitting sync.Mutex
	manager   *devicemanager.ManagerImpl
	pods      *podManager
}

type containerResult struct {
	Name    string              `json:"name"`
	Devices map[string][]string `json:"devices"`
	Envs    map[string]string   `json:"envs"`
}

type admitResult struct {
	Admitted          bool                 `json:"admitted"`
	Reason            string               `json:"reason,omitempty"`
	Message           string               `json:"message,omitempty"`
	Containers        []containerResult    `json:"containers,omitempty"`
	ContainerStatuses []v1.ContainerStatus `json:"containerStatuses,omitempty"`
}

func (h *harness) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admit", func(w http.ResponseWriter, r *http.Request) {
		var pod v1.Pod
		if err := json.NewDecoder(r.Body).Decode(&pod); err != nil || pod.UID == "" {
			http.Error(w, fmt.Sprintf("a v1 Pod with a UID is required: %v", err), http.StatusBadRequest)
			return
		}
		reply(w, h.admit(r.Context(), &pod))
	})
	mux.HandleFunc("POST /remove", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			UID types.UID `json:"uid"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.UID == "" {
			http.Error(w, "a JSON body with the pod's uid is required", http.StatusBadRequest)
			return
		}
		h.pods.remove(body.UID)
		h.manager.UpdateAllocatedDevices()
		reply(w, map[string]bool{"removed": true})
	})
	mux.HandleFunc("GET /capacity", func(w http.ResponseWriter, r *http.Request) {
		capacity, allocatable, _ := h.manager.GetCapacity()
		reply(w, map[string]v1.ResourceList{"capacity": capacity, "allocatable": allocatable})
	})
	mux.HandleFunc("GET /statuses", func(w http.ResponseWriter, r *http.Request) {
		statuses := map[types.UID][]v1.ContainerStatus{}
		for _, pod := range h.pods.GetActivePods() {
			statuses[pod.UID] = h.statuses(pod)
		}
		reply(w, statuses)
	})
	return mux
}

// admit runs the device manager's part of pod admission: Allocate for each container in the
// kubelet's order (init containers first), then reports what each container holds. A pod already
// admitted is answered from what it holds (the simulated kubelet may ask again after a restart).
func (h *harness) admit(ctx context.Context, pod *v1.Pod) admitResult {
	h.admitting.Lock()
	defer h.admitting.Unlock()
	if !h.pods.has(pod.UID) {
		h.pods.add(pod)
		containers := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
		for i := range containers {
			if err := h.manager.Allocate(pod, &containers[i]); err != nil {
				// The kubelet rejects the pod (it becomes Failed, so inactive); the devices of its
				// containers allocated so far are freed at the next UpdateAllocatedDevices.
				h.pods.remove(pod.UID)
				h.manager.UpdateAllocatedDevices()
				result := admission.GetPodAdmitResult(err)
				return admitResult{Reason: result.Reason, Message: result.Message}
			}
		}
	}
	result := admitResult{Admitted: true, ContainerStatuses: h.statuses(pod)}
	for _, container := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		devices := map[string][]string{}
		for resource, instances := range h.manager.GetDevices(string(pod.UID), container.Name) {
			ids := make([]string, 0, len(instances))
			for id := range instances {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			devices[resource] = ids
		}
		envs := map[string]string{}
		if options, err := h.manager.GetDeviceRunContainerOptions(ctx, pod, &container); err == nil && options != nil {
			for _, env := range options.Envs {
				envs[env.Name] = env.Value
			}
		}
		result.Containers = append(result.Containers, containerResult{Name: container.Name, Devices: devices, Envs: envs})
	}
	return result
}

// statuses is the allocatedResourcesStatus the kubelet reports for each app container.
func (h *harness) statuses(pod *v1.Pod) []v1.ContainerStatus {
	status := v1.PodStatus{}
	for _, container := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, v1.ContainerStatus{Name: container.Name})
	}
	h.manager.UpdateAllocatedResourcesStatus(pod, &status)
	return status.ContainerStatuses
}

func reply(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// podManager holds the pods admitted and not yet removed: the kubelet's active pods.
type podManager struct {
	mu    sync.Mutex
	pods  map[types.UID]*v1.Pod
	order []types.UID
}

func newPodManager() *podManager { return &podManager{pods: map[types.UID]*v1.Pod{}} }

func (p *podManager) add(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pods[pod.UID]; !ok {
		p.order = append(p.order, pod.UID)
	}
	p.pods[pod.UID] = pod
}

func (p *podManager) remove(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, uid)
	kept := p.order[:0]
	for _, each := range p.order {
		if each != uid {
			kept = append(kept, each)
		}
	}
	p.order = kept
}

func (p *podManager) has(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.pods[uid]
	return ok
}

// GetActivePods lists the pods in the order they were added, as the kubelet's pod manager keeps them.
func (p *podManager) GetActivePods() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	pods := make([]*v1.Pod, 0, len(p.order))
	for _, uid := range p.order {
		pods = append(pods, p.pods[uid])
	}
	return pods
}

func (p *podManager) GetPods() []*v1.Pod { return p.GetActivePods() }

func (p *podManager) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for _, pod := range p.GetActivePods() {
		if pod.Namespace == namespace && pod.Name == name {
			return pod, true
		}
	}
	return nil, false
}

// devicesProvider adapts the manager to the PodResources server, one entry per device and NUMA
// node, as the kubelet's container manager does.
type devicesProvider struct{ m *devicemanager.ManagerImpl }

func (d devicesProvider) UpdateAllocatedDevices() { d.m.UpdateAllocatedDevices() }

func (d devicesProvider) GetDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices {
	return toContainerDevices(d.m.GetDevices(podUID, containerName))
}

func (d devicesProvider) GetAllocatableDevices() []*podresourcesv1.ContainerDevices {
	return toContainerDevices(d.m.GetAllocatableDevices())
}

func toContainerDevices(devices devicemanager.ResourceDeviceInstances) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for resource, instances := range devices {
		for id, device := range instances {
			nodes := device.GetTopology().GetNodes()
			if len(nodes) == 0 {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id}})
				continue
			}
			for _, node := range nodes {
				out = append(out, &podresourcesv1.ContainerDevices{
					ResourceName: resource,
					DeviceIds:    []string{id},
					Topology:     &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: node.GetID()}}},
				})
			}
		}
	}
	return out
}

// noHints is the kubelet's default topology manager policy, none: no NUMA hint for any container,
// so the device manager asks the plugin's GetPreferredAllocation for every allocation.
type noHints struct{}

func (noHints) GetAffinity(string, string) topologymanager.TopologyHint {
	return topologymanager.TopologyHint{}
}
func (noHints) GetPolicy() topologymanager.Policy { return topologymanager.NewNonePolicy() }
func (noHints) Name() string                       { return "none" }

// allReady: the simulated kubelet hands pods over only once it has listed them.
type allReady struct{}

func (allReady) AddSource(string) {}
func (allReady) AllReady() bool   { return true }

type noCPUs struct{}

func (noCPUs) GetCPUs(string, string) []int64 { return nil }
func (noCPUs) GetAllocatableCPUs() []int64    { return nil }

type noMemory struct{}

func (noMemory) GetMemory(string, string) []*podresourcesv1.ContainerMemory { return nil }
func (noMemory) GetAllocatableMemory() []*podresourcesv1.ContainerMemory    { return nil }

type noClaims struct{}

func (noClaims) GetDynamicResources(*v1.Pod, *v1.Container) []*podresourcesv1.DynamicResource {
	return nil
}
