// Replica-only scaling in Go, deciding exactly as the Rust
// policies-wasm/replica-only: every task keeps one variant (the one `variant` pins,
// else the one it had at the first tick) and scales its instances on the queue: the
// queue over `queue_per_instance` (by default the variant's batch ceiling), rounded
// up, within the budget's cores. More are asked at once; fewer after
// `scale_down_after_ticks` ticks in a row that wanted fewer.
package main

import (
	"bytes"
	"encoding/json"
	"math"

	"modelless/policies/policy"
)

type parameters struct {
	Variant             *string `json:"variant"`
	QueuePerInstance    *uint32 `json:"queue_per_instance"`
	ScaleDownAfterTicks uint32  `json:"scale_down_after_ticks"`
	MaxInstances        uint32  `json:"max_instances"`
}

type state struct {
	Kept     map[string]string `json:"kept"`
	LowTicks map[string]uint32 `json:"low_ticks"`
}

type replicaOnly struct {
	parameters parameters
	state      state
}

func (r *replicaOnly) Init(raw json.RawMessage) error {
	p := parameters{ScaleDownAfterTicks: 10, MaxInstances: 8}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&p); err != nil {
		return err
	}
	r.parameters = p
	return nil
}

func (r *replicaOnly) SaveState() (any, error) { return r.state, nil }

func (r *replicaOnly) LoadState(raw json.RawMessage) error {
	s := state{Kept: map[string]string{}, LowTicks: map[string]uint32{}}
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	r.state = s
	return nil
}

func (r *replicaOnly) Decide(snapshot *policy.Snapshot) (policy.Decision, error) {
	var cores *float64
	if snapshot.System.Budget != nil {
		cores = &snapshot.System.Budget.Cores
	}
	decision := policy.Decision{Tasks: []policy.TaskDecision{}}
	for i := range snapshot.Tasks {
		if wants, ok := r.towards(&snapshot.Tasks[i], cores); ok {
			decision.Tasks = append(decision.Tasks, wants)
		}
	}
	return decision, nil
}

func (r *replicaOnly) towards(task *policy.TaskSnapshot, cores *float64) (policy.TaskDecision, bool) {
	kept, seen := r.state.Kept[task.Name]
	if !seen {
		kept = task.Active.Variant
		if pinned := r.parameters.Variant; pinned != nil && task.Variant(*pinned) != nil {
			kept = *pinned
		}
		r.state.Kept[task.Name] = kept
	}
	variant := task.Variant(kept)
	if variant == nil {
		return policy.TaskDecision{}, false
	}
	if task.Active.Variant != kept {
		return policy.TaskDecision{Task: task.Name, Variant: &kept}, true
	}
	perInstance := 0.0
	if variant.Share != nil {
		perInstance = variant.Share.Cores
	}
	most := instancesWithin(cores, perInstance, r.parameters.MaxInstances)
	target := uint32(8)
	if variant.BatchCeiling != nil {
		target = *variant.BatchCeiling
	}
	if r.parameters.QueuePerInstance != nil {
		target = *r.parameters.QueuePerInstance
	}
	target = max(target, 1)
	queued := (task.QueueLength + uint64(target) - 1) / uint64(target)
	wanted := uint32(min(max(queued, 1), uint64(most)))
	now := max(variant.ServingInstances(), 1)
	low := r.state.LowTicks[task.Name]
	if wanted < now {
		low++
	} else {
		low = 0
	}
	r.state.LowTicks[task.Name] = low
	if !(wanted > now || (wanted < now && low >= r.parameters.ScaleDownAfterTicks)) {
		return policy.TaskDecision{}, false
	}
	r.state.LowTicks[task.Name] = 0
	return policy.TaskDecision{Task: task.Name, Instances: &wanted}, true
}

// The most instances of perInstance cores that `cores` hold, within 1 and most
// (modelless_policy_abi::instances_within).
func instancesWithin(cores *float64, perInstance float64, most uint32) uint32 {
	fit := uint32(math.MaxUint32)
	if cores != nil && perInstance > 0 {
		f := math.Max(math.Floor(*cores/perInstance), 1)
		if f < math.MaxUint32 {
			fit = uint32(f)
		}
	}
	return max(min(most, fit), 1)
}

func init() {
	policy.Export(&replicaOnly{
		parameters: parameters{ScaleDownAfterTicks: 10, MaxInstances: 8},
		state:      state{Kept: map[string]string{}, LowTicks: map[string]uint32{}},
	})
}

func main() {}
