package plan

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

// GangIndex names the pod informer's index of gang pods by "<namespace>/<group>", so Permit reads a
// gang's pods (O(gang)) instead of walking every pod of the cluster once per member (O(pods)).
const GangIndex = "phalanx.io/plan-gang"

// IndexGang is GangIndex's function: a pod of a readable barrier is filed under its namespace and
// group; any other object under nothing.
func IndexGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	gang, ok := GangOf(pod)
	if !ok {
		return nil, nil
	}
	return []string{GangKey(pod.Namespace, gang.Group)}, nil
}

// GangKey is the GangIndex key of a namespace's gang.
func GangKey(namespace, group string) string { return namespace + "/" + group }

// Placed counts the pods of pod's gang among members (other than pod itself) that are placed: bound to
// a node, or assumed by this scheduler (reserved, waiting at its Permit barrier or binding).
func Placed(pod *v1.Pod, gang Gang, members []*v1.Pod, assumed func(types.UID) bool) int {
	placed := 0
	for _, other := range members {
		held := other.Spec.NodeName != "" || assumed(other.UID)
		if other.UID != pod.UID && held && SameGang(pod, other, gang) {
			placed++
		}
	}
	return placed
}

// Unplaced is the pods of pod's gang among members (other than pod itself) that are not placed yet and
// carry a plan: Permit asks kube-scheduler to try them again now (PodsToActivate), as scheduler-plugins'
// coscheduling does. A member turned back at Permit (its wait timed out) waits in kube-scheduler's
// unschedulable pods until an event it registered for comes; when the last of its gang is placed later
// through an event of its own (a new plan written on it), nothing else would bring the others back
// before kube-scheduler's five-minute flush, and the last one would time out alone at Permit.
func Unplaced(pod *v1.Pod, gang Gang, members []*v1.Pod, assumed func(types.UID) bool) []*v1.Pod {
	var unplaced []*v1.Pod
	for _, other := range members {
		_, planned := other.Annotations[Annotation]
		waiting := other.Spec.NodeName == "" && other.DeletionTimestamp == nil && !assumed(other.UID)
		if other.UID != pod.UID && planned && waiting && SameGang(pod, other, gang) {
			unplaced = append(unplaced, other)
		}
	}
	return unplaced
}
