package plan

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// GangAnnotation is where the release pass writes, on each pod of a gang it releases, how many of the
// gang's pods it planned together and the gang's name: "<count>:<group>". The plugin's Permit holds
// each of them until that many pods of the gang, in the pod's namespace, are placed.
const GangAnnotation = "phalanx.io/plan-gang"

// Gang is the barrier a pod waits at: Count pods of Group (in the pod's namespace) placed together.
type Gang struct {
	Group string
	Count int
}

// ParseGang reads a GangAnnotation's text; the error says what is wrong.
func ParseGang(text string) (Gang, error) {
	count, group, found := strings.Cut(text, ":")
	n, err := strconv.Atoi(count)
	if !found || err != nil || n < 1 || group == "" || count != strconv.Itoa(n) {
		return Gang{}, fmt.Errorf("%s %q is not <count>:<group>", GangAnnotation, text)
	}
	return Gang{Group: group, Count: n}, nil
}

// GangOf is pod's barrier; ok is false for a pod without one (a pod on its own), or whose annotation
// cannot be read (it then waits for nobody: a gang's pods are released together, planned together).
func GangOf(pod *v1.Pod) (Gang, bool) {
	text, found := pod.Annotations[GangAnnotation]
	if !found {
		return Gang{}, false
	}
	gang, err := ParseGang(text)
	return gang, err == nil && gang.Count > 1
}

// SameGang tells whether other belongs to the gang of pod (same namespace, same group), and still
// counts: a member that finished frees its place.
func SameGang(pod, other *v1.Pod, gang Gang) bool {
	if other.Namespace != pod.Namespace || other.Status.Phase == v1.PodSucceeded || other.Status.Phase == v1.PodFailed {
		return false
	}
	theirs, ok := GangOf(other)
	return ok && theirs.Group == gang.Group
}

// Placed counts the pods of pod's gang among pods (other than pod itself): bound, or assumed by this
// scheduler and waiting at its Permit barrier.
func Placed(pod *v1.Pod, gang Gang, pods []*v1.Pod) int {
	placed := 0
	for _, other := range pods {
		if other.UID != pod.UID && SameGang(pod, other, gang) {
			placed++
		}
	}
	return placed
}
