package plan

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestParse(t *testing.T) {
	cases := []struct {
		text string
		want Plan
		err  string
	}{
		{"n1:3,1", Plan{Node: "n1", GPUs: []int{1, 3}}, ""},
		{"n1:", Plan{Node: "n1"}, ""},
		{"n1", Plan{}, `plan "n1" is not <node>:<gpu indices>`},
		{":0", Plan{}, `plan ":0" is not <node>:<gpu indices>`},
		{"n1:0,0", Plan{}, `plan "n1:0,0": GPU index 0 is repeated`},
		{"n1:64", Plan{}, `plan "n1:64": GPU index "64" is not an integer from 0 to 63`},
		{"n1:+1", Plan{}, `plan "n1:+1": GPU index "+1" is not an integer from 0 to 63`},
		{"n1:01", Plan{}, `plan "n1:01": GPU index "01" is not an integer from 0 to 63`},
	}
	for _, c := range cases {
		got, err := Parse(c.text)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Parse(%q) error = %v, want %q", c.text, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.text, got, err, c.want)
		}
	}
}

func pod(name string, annotations map[string]string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Status:     v1.PodStatus{Phase: phase},
	}
}

func TestTaken(t *testing.T) {
	bound := pod("bound", map[string]string{GPUsAnnotation: "0,1"}, v1.PodRunning)
	assumed := pod("assumed", map[string]string{Annotation: "n1:2"}, v1.PodPending)
	elsewhere := pod("elsewhere", map[string]string{Annotation: "n2:3"}, v1.PodPending)
	finished := pod("finished", map[string]string{GPUsAnnotation: "4"}, v1.PodSucceeded)
	self := pod("self", map[string]string{Annotation: "n1:5"}, v1.PodPending)
	pods := []*v1.Pod{bound, assumed, elsewhere, finished, self}
	cases := []struct {
		want   []int
		index  int
		holder string
		taken  bool
	}{
		{[]int{1}, 1, "ml/bound", true},
		{[]int{2, 6}, 2, "ml/assumed", true},
		{[]int{3}, 0, "", false}, // planned for another node
		{[]int{4}, 0, "", false}, // its holder finished
		{[]int{5}, 0, "", false}, // the pod itself
		{nil, 0, "", false},
	}
	for _, c := range cases {
		index, holder, taken := Taken(c.want, pods, "n1", "uid-self")
		if index != c.index || holder != c.holder || taken != c.taken {
			t.Errorf("Taken(%v) = %d, %q, %v; want %d, %q, %v", c.want, index, holder, taken, c.index, c.holder, c.taken)
		}
	}
}
