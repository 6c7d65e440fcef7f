package plan

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// SealAnnotation is where the placement manager writes a plan's seal, in the same patch as the plan.
	SealAnnotation = "phalanx.io/plan-seal"
	// MinKeyBytes is the shortest plan key accepted, as the placement manager requires
	// (kubeio.plan_seal.MIN_KEY_BYTES).
	MinKeyBytes = 32
)

// Seal checks that a plan was written by the holder of the plan key: the placement manager, which seals
// each plan with HMAC-SHA256 over "<namespace>/<name>\n<plan>\n<unix seconds>" and writes
// "<unix seconds>.<base64url HMAC, unpadded>" (kubeio/plan_seal.py makes exactly this message). A user
// who may write their own pods' annotations cannot make one, so cannot choose a node past the queues.
// A plan sealed under any of the keys is believed: during a rotation the key file holds the new key and
// the old one (kubeio/plan_seal.py, "Rotation").
type Seal struct {
	keys [][]byte
	// Window is how long before the pod's creationTimestamp a seal may have been made: the webhook seals
	// a pod's plan before the API server stores it (and stamps the time), on a clock that may run a
	// little behind. A seal older than that was made for an earlier pod of the same name.
	Window time.Duration
}

// ReadKey reads the plan keys from path, one per line, surrounding whitespace and blank lines dropped,
// as the placement manager reads them (which seals with the first).
func ReadKey(path string, window time.Duration) (*Seal, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan key file: %w", err)
	}
	var keys [][]byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if key := bytes.TrimSpace(line); len(key) > 0 {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("plan key file %q holds no key", path)
	}
	for i, key := range keys {
		if len(key) < MinKeyBytes {
			return nil, fmt.Errorf("plan key file %q holds %d bytes on its line %d; at least %d are needed",
				path, len(key), i+1, MinKeyBytes)
		}
	}
	return &Seal{keys: keys, Window: window}, nil
}

// Check returns nil when seal is the placement manager's seal of plan on the pod namespace/name, made
// no earlier than Window before created; else an error a user can read.
func (s *Seal) Check(namespace, name, plan, seal string, created time.Time) error {
	if seal == "" {
		return fmt.Errorf("its plan has no %s: phalanx's placement manager seals every plan it writes, so "+
			"someone else wrote this one", SealAnnotation)
	}
	at, mac, found := strings.Cut(seal, ".")
	when, err := strconv.ParseInt(at, 10, 64)
	if !found || err != nil || at != strconv.FormatInt(when, 10) {
		return fmt.Errorf("its %s %q is not <unix seconds>.<signature>", SealAnnotation, seal)
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !s.made(got, fmt.Sprintf("%s/%s\n%s\n%d", namespace, name, plan, when)) {
		return fmt.Errorf("its %s does not match its plan: the plan was not written by phalanx's "+
			"placement manager for this pod", SealAnnotation)
	}
	if made := time.Unix(when, 0); made.Before(created.Add(-s.Window)) {
		return fmt.Errorf("its plan was sealed at %s, before the pod was created (%s): it was copied from "+
			"an earlier pod of the same name", made.UTC().Format(time.RFC3339), created.UTC().Format(time.RFC3339))
	}
	return nil
}

// made tells whether mac is the HMAC-SHA256 of message under one of the keys.
func (s *Seal) made(mac []byte, message string) bool {
	for _, key := range s.keys {
		want := hmac.New(sha256.New, key)
		want.Write([]byte(message))
		if hmac.Equal(mac, want.Sum(nil)) {
			return true
		}
	}
	return false
}
