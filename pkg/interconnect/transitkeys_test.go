package interconnect

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
)

func TestKeysCaughtUpWaitsForEveryKnownGateway(t *testing.T) {
	start := time.Unix(1000, 0)
	p := pendingKeys{keys: "kovn-ts-az3=3", nbCfg: 7, since: start}
	installed := map[string]int64{"gw1": 7, "gw2": 6}
	caughtUp := func(ch string, cfg int64) (bool, bool) {
		v, ok := installed[ch]
		return ok && v >= cfg, ok
	}
	if keysCaughtUp([]string{"gw1", "gw2"}, p, start.Add(time.Second), caughtUp) {
		t.Fatal("published while gw2's ovn-controller has installed only nb_cfg 6 of 7")
	}
	if !keysCaughtUp([]string{"gw1", "gw3"}, p, start.Add(time.Second), caughtUp) {
		t.Fatal("held back by gw3, whose state is unknown")
	}
	if !keysCaughtUp([]string{"gw1", "gw2"}, p, start.Add(keyCatchUpTimeout), caughtUp) {
		t.Fatal("still held back after the timeout")
	}
	installed["gw2"] = 8
	if !keysCaughtUp([]string{"gw1", "gw2"}, p, start.Add(time.Second), caughtUp) {
		t.Fatal("held back though every gateway installed nb_cfg 7 or later")
	}
}

func TestAnnotatedWithAndJoinKeys(t *testing.T) {
	want := joinKeys(map[string]string{"kovn-ts1-az1": "5", "kovn-ts-az1": "1"})
	if want != "kovn-ts-az1=1,kovn-ts1-az1=5" {
		t.Fatalf("joinKeys = %q", want)
	}
	node := func(name, keys string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if keys != "" {
			n.Annotations = map[string]string{annotation.ICTransitKeys: keys}
		}
		return n
	}
	nodes := []corev1.Node{node("gw1", want), node("gw2", "kovn-ts-az1=2"), node("other", "")}
	if annotatedWith(nodes, []string{"gw1", "gw2"}, want) {
		t.Fatal("gw2 carries old keys")
	}
	if !annotatedWith(nodes, []string{"gw1"}, want) {
		t.Fatal("gw1 carries the keys; other is no gateway")
	}
}
