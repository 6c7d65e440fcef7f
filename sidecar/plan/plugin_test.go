package plan

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A member that waits at Permit asks kube-scheduler to try again, at the end of its cycle, the gang's
// members that are turned back and planned (PodsToActivate), not the ones bound or waiting.
func TestPermitWaitingAsksForTheGangsTurnedBackMembers(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{GangIndex: IndexGang})
	pod := planned(ganged("ns", "g-2", "4:g", v1.PodPending))
	members := []*v1.Pod{
		pod,
		planned(bound(ganged("ns", "g-0", "4:g", v1.PodRunning), "n1")),
		planned(ganged("ns", "g-1", "4:g", v1.PodPending)), // turned back at Permit before
		planned(ganged("ns", "g-3", "4:g", v1.PodPending)), // waiting at Permit
	}
	for _, member := range members {
		if err := store.Add(member); err != nil {
			t.Fatal(err)
		}
	}
	assumed := NewAssumed()
	assumed.Add(pod.UID) // Reserve
	assumed.Add(members[3].UID)
	plugin := &Plugin{members: store, assumed: assumed, wait: time.Minute}
	state := framework.NewCycleState()
	stash := framework.NewPodsToActivate()
	state.Write(framework.PodsToActivateKey, stash)

	status, wait := plugin.Permit(context.Background(), state, pod, "n2")

	if status.Code() != fwk.Wait || wait != time.Minute {
		t.Fatalf("Permit = %v, %v; want Wait for a minute (3 of 4 placed)", status, wait)
	}
	if got, ok := stash.Map["ns/g-1"]; len(stash.Map) != 1 || !ok || got.UID != members[2].UID {
		t.Errorf("PodsToActivate = %v, want ns/g-1 alone", stash.Map)
	}
}
