package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every module linked into the gateway binary that ships a NOTICE file
// asks that its notices travel with the binary: the project's NOTICE names
// each of them.
func TestNoticeNamesEveryModuleThatShipsOne(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Dir}}{{end}}{{end}}", "./cmd/gateway")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	notice, err := os.ReadFile("../NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, dir, ok := strings.Cut(sc.Text(), " ")
		if !ok || seen[path] || dir == "" {
			continue
		}
		seen[path] = true
		for _, name := range []string{"NOTICE", "NOTICE.txt", "NOTICE.md"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil && !bytes.Contains(notice, []byte("\n"+path+"\n")) {
				t.Errorf("%s ships %s, and NOTICE does not carry it", path, name)
			}
		}
	}
	if len(seen) < 5 {
		t.Fatalf("go list named %d modules; the gateway links more", len(seen))
	}
}
