package plan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sealCases are seals the placement manager's kubeio.plan_seal made (tests/kubeio/test_plan_seal.py
// checks it still makes them), so the two sides cannot drift apart unnoticed.
type sealCases struct {
	Key   string `json:"key"`
	Cases []struct {
		Pod  string `json:"pod"`
		Plan string `json:"plan"`
		Seal string `json:"seal"`
	} `json:"cases"`
}

func loadSeals(t *testing.T) (sealCases, *Seal) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "seals.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases sealCases
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(cases.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	seal, err := ReadKey(path, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return cases, seal
}

func TestSealMadeByThePlacementManagerIsAccepted(t *testing.T) {
	cases, seal := loadSeals(t)
	for _, c := range cases.Cases {
		namespace, name, _ := strings.Cut(c.Pod, "/")
		created := time.Unix(1796000000, 0)
		if err := seal.Check(namespace, name, c.Plan, c.Seal, created); err != nil {
			t.Errorf("%s %s %s: %v", c.Pod, c.Plan, c.Seal, err)
		}
	}
}

func TestSealRefusals(t *testing.T) {
	cases, seal := loadSeals(t)
	good := cases.Cases[0] // team-a/train-0, gpu-node-1:0,1, sealed at 1796000000
	created := time.Unix(1796000000, 0)
	refusals := []struct {
		about, namespace, name, plan, seal string
		created                            time.Time
		want                               string
	}{
		{"no seal", "team-a", "train-0", good.Plan, "", created, "has no phalanx.io/plan-seal"},
		{"another plan", "team-a", "train-0", "gpu-node-1:0,2", good.Seal, created, "does not match its plan"},
		{"another pod", "team-a", "train-1", good.Plan, good.Seal, created, "does not match its plan"},
		{"another namespace", "team-b", "train-0", good.Plan, good.Seal, created, "does not match its plan"},
		{"not a seal", "team-a", "train-0", good.Plan, "yesterday", created, "is not <unix seconds>.<signature>"},
		{"a padded time", "team-a", "train-0", good.Plan, "0" + good.Seal, created, "is not <unix seconds>"},
		{"a bad signature", "team-a", "train-0", good.Plan, "1796000000.!!", created, "does not match its plan"},
		{"an earlier pod's", "team-a", "train-0", good.Plan, good.Seal, created.Add(31 * time.Second),
			"copied from an earlier pod of the same name"},
	}
	for _, r := range refusals {
		err := seal.Check(r.namespace, r.name, r.plan, r.seal, r.created)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: error %v, want one containing %q", r.about, err, r.want)
		}
	}
	if err := seal.Check("team-a", "train-0", good.Plan, good.Seal, created.Add(29*time.Second)); err != nil {
		t.Errorf("a seal made within the window before creation is refused: %v", err)
	}
}

func TestReadKeyRefusesAShortKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKey(path, time.Second); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("ReadKey of a 5-byte key: %v", err)
	}
	if _, err := ReadKey(filepath.Join(t.TempDir(), "absent"), time.Second); err == nil {
		t.Error("ReadKey of a missing file: no error")
	}
}

// A rotation under way: the file holds the new key first and the old one after; the placement manager
// seals with the new one, and plans it sealed under the old one are still believed.
func TestAKeyFileOfSeveralLinesBelievesPlansSealedUnderAnyOfThem(t *testing.T) {
	cases, _ := loadSeals(t)
	path := filepath.Join(t.TempDir(), "key")
	content := "\n " + strings.Repeat("n", 40) + "\n\n" + cases.Key + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	seal, err := ReadKey(path, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	good := cases.Cases[0]
	namespace, name, _ := strings.Cut(good.Pod, "/")
	if err := seal.Check(namespace, name, good.Plan, good.Seal, time.Unix(1796000000, 0)); err != nil {
		t.Errorf("a plan sealed under the second line's key is refused: %v", err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("n", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if alone, _ := ReadKey(path, 30*time.Second); alone.Check(namespace, name, good.Plan, good.Seal, time.Unix(1796000000, 0)) == nil {
		t.Error("with the old line gone, a plan sealed under it is still believed")
	}
}

func TestReadKeyRefusesAShortKeyOnAnyLineAndAFileWithNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	for content, want := range map[string]string{
		strings.Repeat("n", 40) + "\nshort\n": "5 bytes on its line 2; at least 32",
		"\n \n":                               "holds no key",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadKey(path, time.Second); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadKey of %q: %v, want %q", content, err, want)
		}
	}
}
