package plan

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

// Assumed is the set of gang pods this scheduler has reserved and the API server does not yet show
// bound: waiting at Permit, or allowed and binding. Permit counts them beside the bound ones, as
// kube-scheduler's snapshot would (it holds assumed pods), without walking that snapshot.
//
// A pod leaves the set when it is turned back (Unreserve), or when the pod informer shows it bound or
// deleted; the informer updates its store before it tells its handlers, so a pod that leaves here is
// already counted as bound there.
type Assumed struct {
	mu   sync.Mutex
	uids sets.Set[types.UID]
}

// NewAssumed is an empty set.
func NewAssumed() *Assumed { return &Assumed{uids: sets.New[types.UID]()} }

// Add counts uid as placed until it is bound or turned back.
func (a *Assumed) Add(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.uids.Insert(uid)
}

// Forget stops counting uid.
func (a *Assumed) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.uids.Delete(uid)
}

// Has tells whether uid is reserved and not yet seen bound.
func (a *Assumed) Has(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.uids.Has(uid)
}

// Len is how many pods the set holds (tests read it to see that nothing leaks).
func (a *Assumed) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.uids.Len()
}

// Handler forgets a pod the informer shows bound or deleted.
func (a *Assumed) Handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" {
				a.Forget(pod.UID)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				a.Forget(pod.UID)
			}
		},
	}
}
