// {NAME}: a modelless policy in Go. Decide gets the snapshot and answers a decision;
// tasks it leaves out keep everything. Build with ./build.sh, check with
// `modelless policy check {NAME}.wasm`.
package main

import (
	"fmt"

	"{NAME}/policy"
)

type starter struct{}

func (starter) Decide(snapshot *policy.Snapshot) (policy.Decision, error) {
	for _, task := range snapshot.Tasks {
		policy.Log(policy.Info, fmt.Sprintf("%s: %.1f/s on %s", task.Name, task.Demand.PerS10s, task.Active.Variant))
	}
	return policy.Decision{Tasks: []policy.TaskDecision{}}, nil
}

func init() { policy.Export(starter{}) }

func main() {}
