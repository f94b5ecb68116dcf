package policy

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

type ruleCase struct {
	Tasks           []TaskSnapshot `json:"tasks"`
	SharedPoolCores float64        `json:"shared_pool_cores"`
	Expected        struct {
		Tasks []struct {
			ActiveVariant    *string  `json:"active_variant"`
			ActiveIndex      *int     `json:"active_index"`
			CoresHeld        float64  `json:"cores_held"`
			MayServe         []bool   `json:"may_serve"`
			ServingInstances []uint32 `json:"serving_instances"`
		} `json:"tasks"`
		CoresHeld float64 `json:"cores_held"`
	} `json:"expected"`
}

// The rules answer every case as the Rust rules, which the host uses, answered it.
func TestRulesAnswerAsTheHost(t *testing.T) {
	raw, err := os.ReadFile("../../../policy-abi/schema/rules-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []ruleCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for n, c := range file.Cases {
		for i := range c.Tasks {
			task, want := &c.Tasks[i], c.Expected.Tasks[i]
			var active *string
			if v := task.ActiveVariant(); v != nil {
				active = &v.Name
			}
			index := -1
			if want.ActiveIndex != nil {
				index = *want.ActiveIndex
			}
			mayServe, serving := []bool{}, []uint32{}
			for j := range task.Variants {
				mayServe = append(mayServe, task.Variants[j].MayServe())
				serving = append(serving, task.Variants[j].ServingInstances())
			}
			switch {
			case !reflect.DeepEqual(active, want.ActiveVariant):
				t.Errorf("case %d, task %s: active variant %v, the host says %v", n, task.Name, active, want.ActiveVariant)
			case task.ActiveIndex() != index:
				t.Errorf("case %d, task %s: active index %d, the host says %d", n, task.Name, task.ActiveIndex(), index)
			case task.CoresHeld(c.SharedPoolCores) != want.CoresHeld:
				t.Errorf("case %d, task %s: cores held %v, the host says %v", n, task.Name, task.CoresHeld(c.SharedPoolCores), want.CoresHeld)
			case !reflect.DeepEqual(mayServe, want.MayServe):
				t.Errorf("case %d, task %s: may serve %v, the host says %v", n, task.Name, mayServe, want.MayServe)
			case !reflect.DeepEqual(serving, want.ServingInstances):
				t.Errorf("case %d, task %s: serving instances %v, the host says %v", n, task.Name, serving, want.ServingInstances)
			}
		}
		if got := CoresHeld(c.Tasks, c.SharedPoolCores); got != c.Expected.CoresHeld {
			t.Errorf("case %d: cores held %v, the host says %v", n, got, c.Expected.CoresHeld)
		}
	}
}
