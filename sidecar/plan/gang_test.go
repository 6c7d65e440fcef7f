package plan

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ganged(namespace, name, gang string, phase v1.PodPhase) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name),
	}}
	if gang != "" {
		pod.Annotations = map[string]string{GangAnnotation: gang}
	}
	pod.Status.Phase = phase
	return pod
}

func TestParseGang(t *testing.T) {
	if got, err := ParseGang("3:train"); err != nil || got != (Gang{Group: "train", Count: 3}) {
		t.Errorf("ParseGang(3:train) = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "3", ":train", "0:train", "-1:train", "03:train", "x:train", "3:"} {
		if _, err := ParseGang(bad); err == nil || !strings.Contains(err.Error(), "is not <count>:<group>") {
			t.Errorf("ParseGang(%q) error = %v", bad, err)
		}
	}
}

func TestGangOfAPodOnItsOwnOrWithAnUnreadableBarrierIsNone(t *testing.T) {
	for _, text := range []string{"", "1:alone", "nonsense"} {
		if _, ok := GangOf(ganged("ns", "p", text, v1.PodPending)); ok {
			t.Errorf("GangOf with %q: a barrier", text)
		}
	}
	if gang, ok := GangOf(ganged("ns", "p", "2:g", v1.PodPending)); !ok || gang.Count != 2 {
		t.Errorf("GangOf with 2:g = %+v, %v", gang, ok)
	}
}

func TestPlacedCountsTheGangsLivePodsInItsNamespaceOnly(t *testing.T) {
	pod := ganged("ns", "g-0", "4:g", v1.PodPending)
	gang, _ := GangOf(pod)
	pods := []*v1.Pod{
		pod, // itself: not counted
		ganged("ns", "g-1", "4:g", v1.PodRunning),
		ganged("ns", "g-2", "4:g", v1.PodPending),    // assumed, waiting at Permit
		ganged("ns", "g-3", "4:g", v1.PodSucceeded),  // finished: its place is free
		ganged("other", "g-0", "4:g", v1.PodRunning), // another namespace's gang of that name
		ganged("ns", "h-0", "4:h", v1.PodRunning),    // another gang
		ganged("ns", "solo", "", v1.PodRunning),
	}
	if got := Placed(pod, gang, pods); got != 2 {
		t.Errorf("Placed = %d, want 2 (g-1 and g-2)", got)
	}
}
