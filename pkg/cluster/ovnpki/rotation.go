package ovnpki

import (
	"bytes"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/pkg/pki"
)

// A CA is replaced in three steps, each held for Config.RotationStep, so that every holder of
// a CA bundle (OVN central's Secret volume, the nodes through the ConfigMap, ovn-northd's
// restart, kovn-controller) has one step's bundle before the next step needs it:
//
//  1. trust-next: a next CA is made; every bundle trusts the current and the next CA, and
//     certificates are still issued by the current one.
//  2. retire-previous: the next CA becomes the current one and issues every certificate again
//     (each is "not issued by the current CA"); bundles still trust the previous CA, so a
//     client that has not been given its new certificate yet keeps connecting.
//  3. done: bundles trust the new CA alone.
//
// An operator starts a rotation by annotating the CA Secret with AnnotationRotate; kovn starts
// one itself when a CA it made has passed half of its lifetime. A CA an operator brought is
// rotated only on request (kovn then makes the next CA; bring your own by writing next.crt and
// next.key before annotating).
const (
	AnnotationRotate = "kovn.io/rotate-ca"
	// AnnotationRotationStep and AnnotationRotationSince are kovn's record of a rotation in
	// progress: its step and when that step began (RFC 3339).
	AnnotationRotationStep  = "kovn.io/ca-rotation-step"
	AnnotationRotationSince = "kovn.io/ca-rotation-since"
	StepTrustNext           = "trust-next"
	StepRetirePrevious      = "retire-previous"
	KeyNextCert             = "next.crt"
	KeyNextKey              = "next.key"
	KeyPreviousCert         = "previous.crt"
)

// DefaultRotationStep is how long each step of a CA rotation is held: longer than the
// kubelet takes to update a Secret volume, kovn-daemon to recheck the CA ConfigMap
// (chassistls.Recheck) and the central containers' restart script to notice a new file.
const DefaultRotationStep = 10 * time.Minute

// rotate advances the rotation of CA Secret s (named cn when kovn makes a CA) as due at now
// and says whether s changed.
func rotate(s *corev1.Secret, cn string, cfg Config, now time.Time) (bool, string, error) {
	step := s.Annotations[AnnotationRotationStep]
	since, _ := time.Parse(time.RFC3339, s.Annotations[AnnotationRotationSince])
	held := now.Sub(since) >= cfg.RotationStep
	switch {
	case step == "" && rotationWanted(s, now):
		if len(s.Data[KeyNextCert]) == 0 || len(s.Data[KeyNextKey]) == 0 {
			next, err := pki.NewCA(cn, cfg.CAValidity)
			if err != nil {
				return false, "", err
			}
			keyPEM, err := next.KeyPEM()
			if err != nil {
				return false, "", err
			}
			s.Data[KeyNextCert], s.Data[KeyNextKey] = next.CertPEM, keyPEM
		} else if _, err := pki.LoadCA(s.Data[KeyNextCert], s.Data[KeyNextKey]); err != nil {
			return false, "", fmt.Errorf("%s and %s do not hold a CA: %w", KeyNextCert, KeyNextKey, err)
		}
		delete(s.Annotations, AnnotationRotate)
		setStep(s, StepTrustNext, now)
		return true, "trusting the next CA beside the current one", nil
	case step == StepTrustNext && held:
		s.Data[KeyPreviousCert] = s.Data[KeyCert]
		s.Data[KeyCert], s.Data[KeyKey] = s.Data[KeyNextCert], s.Data[KeyNextKey]
		delete(s.Data, KeyNextCert)
		delete(s.Data, KeyNextKey)
		setStep(s, StepRetirePrevious, now)
		return true, "issuing from the next CA; the previous one is still trusted", nil
	case step == StepRetirePrevious && held:
		delete(s.Data, KeyPreviousCert)
		delete(s.Annotations, AnnotationRotationStep)
		delete(s.Annotations, AnnotationRotationSince)
		return true, "the previous CA is no longer trusted", nil
	}
	return false, "", nil
}

// rotationWanted: an operator asked, or a CA kovn made passed half of its lifetime.
func rotationWanted(s *corev1.Secret, now time.Time) bool {
	if _, ok := s.Annotations[AnnotationRotate]; ok {
		return true
	}
	if s.Labels["app.kubernetes.io/managed-by"] != "kovn" {
		return false
	}
	ca, err := pki.ParseCertificate(s.Data[KeyCert])
	return err == nil && pki.RenewalDue(ca, now)
}

func setStep(s *corev1.Secret, step string, now time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationRotationStep] = step
	s.Annotations[AnnotationRotationSince] = now.UTC().Format(time.RFC3339)
}

// trustBundle is what a CA Secret's CA is trusted as: the current CA, then the next or the
// previous one while a rotation is under way.
func trustBundle(data map[string][]byte) []byte {
	var b bytes.Buffer
	for _, k := range []string{KeyCert, KeyNextCert, KeyPreviousCert} {
		if len(data[k]) > 0 {
			b.Write(bytes.TrimSpace(data[k]))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
