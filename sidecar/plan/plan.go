// Package plan reads the placement phalanx's core planned for a pod, as its release pass writes it on
// the pod (the annotation phalanx.io/plan, "<node>:<gpu indices>"), and the GPU indices the pods on a
// node hold. It decides nothing: every rule that chose the plan lives in phalanx's Python core
// (scheduling/); this package only checks that the plan still holds. See
// docs/design/framework-sidecar.md.
package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

const (
	// Annotation is where the release pass writes a pod's plan when it ungates the pod.
	Annotation = "phalanx.io/plan"
	// GPUsAnnotation is where the GPU indices a pod holds are recorded; the Binding merges it into the
	// pod, and the node agent's device plugin allocates exactly those devices.
	GPUsAnnotation = "phalanx.io/gpus"
	// MaxNodeGPUs bounds an index, as phalanx's core bounds it (scheduling.model.MAX_NODE_GPUS).
	MaxNodeGPUs = 64
)

// Plan is one pod's planned node and GPU indices (sorted; empty for a pod without GPUs).
type Plan struct {
	Node string
	GPUs []int
}

// Parse reads a plan annotation's text. The error says what is wrong, in words a user can act on.
func Parse(text string) (Plan, error) {
	node, gpus, found := strings.Cut(text, ":")
	if !found || node == "" {
		return Plan{}, fmt.Errorf("plan %q is not <node>:<gpu indices>", text)
	}
	indices, err := ParseGPUs(gpus)
	if err != nil {
		return Plan{}, fmt.Errorf("plan %q: %w", text, err)
	}
	return Plan{Node: node, GPUs: indices}, nil
}

// ParseGPUs reads "0,1,5" (empty: no GPUs) into sorted indices.
func ParseGPUs(text string) ([]int, error) {
	if text == "" {
		return nil, nil
	}
	parts := strings.Split(text, ",")
	indices := make([]int, 0, len(parts))
	seen := make(map[int]bool, len(parts))
	for _, part := range parts {
		index, err := strconv.Atoi(part)
		if err != nil || index < 0 || index >= MaxNodeGPUs || part != strconv.Itoa(index) {
			return nil, fmt.Errorf("GPU index %q is not an integer from 0 to %d", part, MaxNodeGPUs-1)
		}
		if seen[index] {
			return nil, fmt.Errorf("GPU index %d is repeated", index)
		}
		seen[index] = true
		indices = append(indices, index)
	}
	sort.Ints(indices)
	return indices, nil
}

// FormatGPUs writes indices as the GPUs annotation's text ("0,1,5").
func FormatGPUs(indices []int) string {
	parts := make([]string, len(indices))
	for i, index := range indices {
		parts[i] = strconv.Itoa(index)
	}
	return strings.Join(parts, ",")
}

// Held is the GPU indices pod holds on node: its recorded GPUs once bound, else (a pod this scheduler
// assumed on node and is binding now) its plan's. A pod whose indices cannot be read holds none that
// can be named; phalanx's core counts it the same way.
func Held(pod *v1.Pod, node string) []int {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil // finished: its devices are free again, as the kubelet sees them
	}
	if text, ok := pod.Annotations[GPUsAnnotation]; ok {
		indices, err := ParseGPUs(text)
		if err == nil {
			return indices
		}
		return nil
	}
	if text, ok := pod.Annotations[Annotation]; ok {
		planned, err := Parse(text)
		if err == nil && planned.Node == node {
			return planned.GPUs
		}
	}
	return nil
}

// Taken is the first of want that one of pods (other than the pod with uid self) holds on node, with
// that pod's namespace/name; ok is false when every index is free.
func Taken(want []int, pods []*v1.Pod, node string, self string) (index int, holder string, ok bool) {
	if len(want) == 0 {
		return 0, "", false
	}
	wanted := make(map[int]bool, len(want))
	for _, index := range want {
		wanted[index] = true
	}
	for _, pod := range pods {
		if string(pod.UID) == self {
			continue
		}
		for _, index := range Held(pod, node) {
			if wanted[index] {
				return index, pod.Namespace + "/" + pod.Name, true
			}
		}
	}
	return 0, "", false
}
