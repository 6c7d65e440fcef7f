package plan

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
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

func bound(pod *v1.Pod, node string) *v1.Pod {
	pod.Spec.NodeName = node
	return pod
}

func TestPlacedCountsTheGangsLiveBoundOrAssumedPodsInItsNamespaceOnly(t *testing.T) {
	pod := ganged("ns", "g-0", "4:g", v1.PodPending)
	gang, _ := GangOf(pod)
	pods := []*v1.Pod{
		pod, // itself: not counted
		bound(ganged("ns", "g-1", "4:g", v1.PodRunning), "n1"),
		ganged("ns", "g-2", "4:g", v1.PodPending),                 // assumed, waiting at Permit
		ganged("ns", "g-4", "4:g", v1.PodPending),                 // not yet scheduled
		bound(ganged("ns", "g-3", "4:g", v1.PodSucceeded), "n1"),  // finished: its place is free
		bound(ganged("other", "g-0", "4:g", v1.PodRunning), "n1"), // another namespace's gang of that name
		bound(ganged("ns", "h-0", "4:h", v1.PodRunning), "n1"),    // another gang
		bound(ganged("ns", "solo", "", v1.PodRunning), "n1"),
	}
	assumed := NewAssumed()
	assumed.Add(pod.UID)
	assumed.Add(pods[2].UID)
	if got := Placed(pod, gang, pods, assumed.Has); got != 2 {
		t.Errorf("Placed = %d, want 2 (g-1 and g-2)", got)
	}
}

func TestTheGangIndexFilesAPodUnderItsNamespaceAndGroup(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{GangIndex: IndexGang})
	for _, pod := range []*v1.Pod{
		ganged("ns", "g-0", "2:g", v1.PodPending), ganged("ns", "g-1", "2:g", v1.PodPending),
		ganged("other", "g-0", "2:g", v1.PodPending), ganged("ns", "solo", "", v1.PodPending),
		ganged("ns", "bad", "x:g", v1.PodPending),
	} {
		if err := store.Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.IndexKeys(GangIndex, GangKey("ns", "g"))
	if err != nil || len(got) != 2 || got[0] == got[1] {
		t.Errorf("ns/g = %v, %v; want ns/g-0 and ns/g-1", got, err)
	}
	if keys := store.ListIndexFuncValues(GangIndex); len(keys) != 2 {
		t.Errorf("index keys = %v, want ns/g and other/g", keys)
	}
}

func TestAssumedForgetsAPodTheInformerShowsBoundOrDeleted(t *testing.T) {
	assumed := NewAssumed()
	waiting, binding, gone := ganged("ns", "a", "3:g", v1.PodPending), ganged("ns", "b", "3:g", v1.PodPending),
		ganged("ns", "c", "3:g", v1.PodPending)
	for _, pod := range []*v1.Pod{waiting, binding, gone} {
		assumed.Add(pod.UID)
	}
	handler := assumed.Handler()
	handler.OnUpdate(waiting, waiting.DeepCopy()) // a status change, still unbound
	handler.OnUpdate(binding, bound(binding.DeepCopy(), "n1"))
	handler.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: gone})
	if !assumed.Has(waiting.UID) || assumed.Has(binding.UID) || assumed.Has(gone.UID) || assumed.Len() != 1 {
		t.Errorf("after the events: a %v, b %v, c %v, len %d; want only a", assumed.Has(waiting.UID),
			assumed.Has(binding.UID), assumed.Has(gone.UID), assumed.Len())
	}
}

// BenchmarkPermitCount times what Permit reads for one member of a 256-pod gang in a cluster of
// 150,000 pods: the gang's index entry (now) against a walk over every pod (what the index replaced).
func BenchmarkPermitCount(b *testing.B) {
	const pods, gangSize = 150_000, 256
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{GangIndex: IndexGang})
	all := make([]*v1.Pod, 0, pods)
	for i := range pods {
		text := ""
		if i < gangSize {
			text = fmt.Sprintf("%d:big", gangSize)
		} else if i%8 == 0 {
			text = fmt.Sprintf("8:g%d", i/8)
		}
		pod := bound(ganged("ns", fmt.Sprintf("p-%d", i), text, v1.PodRunning), fmt.Sprintf("n%d", i%5000))
		all = append(all, pod)
		if err := store.Add(pod); err != nil {
			b.Fatal(err)
		}
	}
	pod := ganged("ns", "p-0", fmt.Sprintf("%d:big", gangSize), v1.PodPending)
	gang, _ := GangOf(pod)
	assumed := NewAssumed()
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			objs, _ := store.ByIndex(GangIndex, GangKey("ns", "big"))
			members := make([]*v1.Pod, len(objs))
			for i, obj := range objs {
				members[i] = obj.(*v1.Pod)
			}
			if Placed(pod, gang, members, assumed.Has) != gangSize-1 {
				b.Fatal("miscounted")
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if Placed(pod, gang, all, assumed.Has) != gangSize-1 {
				b.Fatal("miscounted")
			}
		}
	})
}

func TestUnplacedIsTheGangsPlannedMembersNeitherBoundNorAssumed(t *testing.T) {
	pod := planned(ganged("ns", "g-0", "5:g", v1.PodPending))
	gang, _ := GangOf(pod)
	leaving := planned(ganged("ns", "g-6", "5:g", v1.PodPending))
	leaving.DeletionTimestamp = &metav1.Time{}
	pods := []*v1.Pod{
		pod, // itself
		planned(bound(ganged("ns", "g-1", "5:g", v1.PodRunning), "n1")),
		planned(ganged("ns", "g-2", "5:g", v1.PodPending)), // assumed, waiting at Permit
		planned(ganged("ns", "g-3", "5:g", v1.PodPending)), // turned back: to try again
		ganged("ns", "g-4", "5:g", v1.PodPending),          // no plan yet: nothing to try
		planned(ganged("ns", "g-5", "5:g", v1.PodPending)), // to try again
		leaving,
		planned(ganged("other", "g-3", "5:g", v1.PodPending)), // another namespace's gang of that name
		planned(ganged("ns", "h-0", "5:h", v1.PodPending)),    // another gang
	}
	assumed := NewAssumed()
	assumed.Add(pods[2].UID)
	var names []string
	for _, other := range Unplaced(pod, gang, pods, assumed.Has) {
		names = append(names, other.Namespace+"/"+other.Name)
	}
	if got := strings.Join(names, " "); got != "ns/g-3 ns/g-5" {
		t.Errorf("Unplaced = %q, want ns/g-3 ns/g-5", got)
	}
}

func planned(pod *v1.Pod) *v1.Pod {
	pod.Annotations[Annotation] = "n1:0"
	return pod
}
