package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLocalDefaults(t *testing.T) {
	want := LocalSettings{
		MinWorkers: 2, MaxWorkers: 8, RunsPerWorker: 1024, WorkerMemoryMB: 1024, MemoryMB: 128,
		Queue: 64, QueueTimeout: 10 * time.Second, WorkerIdleTimeout: 30 * time.Second, CPUSlots: 1,
	}
	if got := LocalDefaults(2); got != want {
		t.Errorf("LocalDefaults(2) = %+v\nwant %+v", got, want)
	}
	// No CPU count reads as one CPU.
	if got := LocalDefaults(0); got.MaxWorkers != 4 || got.MinWorkers != 1 || got.CPUSlots != 1 {
		t.Errorf("LocalDefaults(0) = %+v", got)
	}
	// poolSize is maxWorkers by its old name, and the warm minimum and the
	// tenant's slots follow the ceiling down.
	if got := (&LocalBackend{PoolSize: 2}).Settings(8); got.MaxWorkers != 2 || got.MinWorkers != 2 || got.CPUSlots != 1 {
		t.Errorf("poolSize 2 on 8 CPUs = %+v", got)
	}
	for _, c := range []struct{ cpus, maxWorkers, want int }{
		{2, 8, 1}, {8, 4, 3}, {4, 8, 3}, {4, 2, 1}, {4, 1, 1}, {0, 4, 1}, {1, 4, 1}, {16, 64, 15},
	} {
		if got := DefaultCPUSlots(c.cpus, c.maxWorkers); got != c.want {
			t.Errorf("DefaultCPUSlots(%d, %d) = %d, want %d", c.cpus, c.maxWorkers, got, c.want)
		}
	}
}

// shared is a valid file with two tenants on one local group; each case
// below changes it one way.
const shared = `listen: 127.0.0.1:8080
backends:
  - name: local
    type: local
    local:
      maxWorkers: 4
tenants:
  - name: a
    backend: local
    keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]
    policy:
      timeoutMs: 1000
  - name: b
    backend: local
    keys: [{name: k, hash: sha256:56e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]
routes:
  - path: /v1/executor
    kind: executor
`

// problems parses src on a machine of numCPU CPUs and returns every
// problem's whole text.
func problems(t *testing.T, src string, numCPU int) []string {
	t.Helper()
	_, err := parse("c.yaml", []byte(src), noEnv, numCPU)
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("got %v, want Problems", err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return out
}

func TestSharedFileIsValid(t *testing.T) {
	for _, cpus := range []int{1, 2, 3, 64} {
		if ps := problems(t, shared, cpus); ps != nil {
			t.Errorf("on %d CPUs:\n%s", cpus, strings.Join(ps, "\n"))
		}
	}
}

// Each check that refuses a cap a local group can never honour, its whole
// text, at its line. A key the file left out is placed at the line of what
// encloses it.
func TestCapsALocalGroupCannotHonour(t *testing.T) {
	const policyA = "      timeoutMs: 1000\n"
	const group = "      maxWorkers: 4\n"
	cases := []struct {
		name  string
		edits []string // pairs: from, to
		want  []string
	}{
		{
			"cpuSlots above maxWorkers", []string{policyA, policyA + "      cpuSlots: 5\n"},
			[]string{`c.yaml:13: tenants[0].policy.cpuSlots: 5 is more worker processes than backend "local" may ever start (maxWorkers 4)`},
		},
		{
			"cpuSlots that take every worker of a shared group", []string{policyA, policyA + "      cpuSlots: 4\n"},
			[]string{`c.yaml:13: tenants[0].policy.cpuSlots: 4 would let it take every worker process of backend "local", which 1 other tenant shares; at most 3`},
		},
		{
			"a shared group of one worker", []string{group, "      poolSize: 1\n"},
			[]string{
				`c.yaml:11: tenants[0].policy.cpuSlots: the default of 1 would let it take every worker process of backend "local", which 1 other tenant shares; a shared group needs maxWorkers of at least 2`,
				`c.yaml:13: tenants[1].policy.cpuSlots: the default of 1 would let it take every worker process of backend "local", which 1 other tenant shares; a shared group needs maxWorkers of at least 2`,
			},
		},
		{
			"tenant memory above a worker process", []string{policyA, policyA + "      memoryMB: 2048\n"},
			[]string{`c.yaml:13: tenants[0].policy.memoryMB: 2048 MB is more than one worker process of backend "local" may hold (workerMemoryMB 1024 MB)`},
		},
		{
			"tenant memory above the run limit", []string{policyA, policyA + "      memoryMB: 512\n"},
			[]string{`c.yaml:13: tenants[0].policy.memoryMB: 512 MB is above backend "local"'s limit of 128 MB; a tenant can only lower it`},
		},
		{
			"maxConcurrent past the slots",
			[]string{group, group + "      runsPerWorker: 32\n", policyA, policyA + "      cpuSlots: 1\n      maxConcurrent: 40\n      maxHandles: 8\n",
				"a7d54fb}]\nroutes", "a7d54fb}]\n    policy: {cpuSlots: 2}\nroutes"},
			[]string{`c.yaml:15: tenants[0].policy.maxConcurrent: 40 is more than its 1 worker process can hold at runsPerWorker 32 each (32); lower it, or raise cpuSlots or backend "local"'s runsPerWorker`},
		},
		{
			"maxHandles from the operator's limit",
			[]string{"listen: 127.0.0.1:8080\n", "listen: 127.0.0.1:8080\nlimits: {maxConcurrent: 32}\n", group, group + "      runsPerWorker: 16\n", policyA, policyA + "      cpuSlots: 2\n"},
			[]string{
				`c.yaml:13: tenants[0].policy.maxHandles: 64 (limits.maxHandles) is more than its 2 worker processes can hold at runsPerWorker 16 each (32); lower it, or raise cpuSlots or backend "local"'s runsPerWorker`,
				// b is at the default cpuSlots, 1 on 2 CPUs.
				`c.yaml:16: tenants[1].policy.maxConcurrent: 32 (limits.maxConcurrent) is more than its 1 worker process can hold at runsPerWorker 16 each (16); lower it, or raise cpuSlots or backend "local"'s runsPerWorker`,
				`c.yaml:16: tenants[1].policy.maxHandles: 64 (limits.maxHandles) is more than its 1 worker process can hold at runsPerWorker 16 each (16); lower it, or raise cpuSlots or backend "local"'s runsPerWorker`,
			},
		},
		{
			"minWorkers above maxWorkers", []string{group, group + "      minWorkers: 6\n"},
			[]string{`c.yaml:7: backends[0].local.minWorkers: 6 is more than maxWorkers (4): the group could never keep that many worker processes started`},
		},
		{
			"minWorkers above the default ceiling", []string{group, "      minWorkers: 9\n"},
			[]string{`c.yaml:6: backends[0].local.minWorkers: 9 is more than maxWorkers (8 by default: 4 per CPU): the group could never keep that many worker processes started`},
		},
		{
			"worker memory below the run limit", []string{group, group + "      workerMemoryMB: 100\n"},
			[]string{`c.yaml:7: backends[0].local.workerMemoryMB: 100 MB is below memoryMB (128 MB by default): a worker process could not hold one execution at its memory limit`},
		},
		{
			"poolSize and maxWorkers", []string{group, group + "      poolSize: 4\n"},
			[]string{`c.yaml:7: backends[0].local.poolSize: poolSize is the old name of maxWorkers; keep one`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := shared
			for i := 0; i < len(c.edits); i += 2 {
				next := strings.Replace(src, c.edits[i], c.edits[i+1], 1)
				if next == src {
					t.Fatalf("edit %d changed nothing", i/2)
				}
				src = next
			}
			if got := problems(t, src, 2); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
