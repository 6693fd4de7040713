package gateway

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDeploymentDocListsEveryServedSeries: the metrics table of
// docs/deployment.md, the operator's reference, names every codemode_
// series the gateway serves, and no series it does not.
func TestDeploymentDocListsEveryServedSeries(t *testing.T) {
	raw, err := os.ReadFile("../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "\n## Metrics\n")
	if !found {
		t.Fatal("docs/deployment.md has no ## Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	name := regexp.MustCompile("`(codemode_[a-z_]+)`")
	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		// The first cell of each row names the series.
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = true
		}
	}
	served := registeredSeries(t)
	for n := range served {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(n, "codemode_") && !documented[n] && !(base != n && documented[base]) {
			t.Errorf("the gateway serves %s, which the metrics table of docs/deployment.md does not list", n)
		}
	}
	for n := range documented {
		if !served[n] {
			t.Errorf("docs/deployment.md lists %s, which the gateway does not serve", n)
		}
	}
}
