package main

import (
	"fmt"
	"testing"
)

func TestExplicitCollector(t *testing.T) {
	c, err := explicitCollector([]string{"ic-nb=OVN_IC_Northbound:/run/icnb.ctl:/var/icnb.db", "ic-sb=OVN_IC_Southbound:/run/icsb.ctl"},
		[]string{"ic=/run/ovn-ic.ctl"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.DBs, c.Daemons)
	want := "[{ic-nb OVN_IC_Northbound /run/icnb.ctl /var/icnb.db} {ic-sb OVN_IC_Southbound /run/icsb.ctl }] [{ic /run/ovn-ic.ctl}]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	for _, bad := range [][2][]string{{{"ic-nb"}}, {{"=OVN:/x"}}, {{"nb=OVN"}}, {{"nb=:/x"}}, {{"nb=OVN:/x:/y:/z"}}, {{"nb=OVN:/x"}, {"northd"}}} {
		if _, err := explicitCollector(bad[0], bad[1]); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
