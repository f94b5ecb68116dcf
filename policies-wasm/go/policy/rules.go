package policy

// The rules a policy reads a snapshot by to agree with the host, as the Rust kit has
// them (policy-abi/src/rules.rs): which variant serves a task, whether a variant may
// serve, and the cores serving instances hold, the pool sessions share counted once.
// rules_test.go checks them against the cases the Rust rules answered
// (policy-abi/schema/rules-cases.json).

// Variant is the variant of task named name, or nil.
func (task *TaskSnapshot) Variant(name string) *VariantSnapshot {
	for i := range task.Variants {
		if task.Variants[i].Name == name {
			return &task.Variants[i]
		}
	}
	return nil
}

// ActiveVariant is the variant serving task: the one Active names, or nil.
func (task *TaskSnapshot) ActiveVariant() *VariantSnapshot {
	return task.Variant(task.Active.Variant)
}

// ActiveIndex is the index of the serving variant in Variants, or -1.
func (task *TaskSnapshot) ActiveIndex() int {
	for i := range task.Variants {
		if task.Variants[i].Name == task.Active.Variant {
			return i
		}
	}
	return -1
}

// MayServe says whether the variant fits its task and did not fail to load.
func (v *VariantSnapshot) MayServe() bool {
	return v.Refused == nil && v.State != VariantStateFailed
}

// ServingInstances counts its instances serving and starting.
func (v *VariantSnapshot) ServingInstances() uint32 {
	return v.Instances + v.InstancesStarting
}

// servingCores: the cores of the task's instances with threads of their own, and
// whether they run on the shared pool.
func (task *TaskSnapshot) servingCores() (float64, bool) {
	v := task.ActiveVariant()
	if v == nil || v.Share == nil {
		return 0, false
	}
	serving := v.ServingInstances()
	return v.Share.Cores * float64(serving), v.Share.Cores == 0 && serving > 0
}

// CoresHeld is the cores the task's serving instances hold, the shared pool
// (sharedPoolCores) counted where they run on it.
func (task *TaskSnapshot) CoresHeld(sharedPoolCores float64) float64 {
	own, pooled := task.servingCores()
	if pooled {
		own += sharedPoolCores
	}
	return own
}

// CoresHeld is the cores the serving instances of tasks hold: each task's own, and
// the shared pool once, however many run on it.
func CoresHeld(tasks []TaskSnapshot, sharedPoolCores float64) float64 {
	held, pooled := 0.0, false
	for i := range tasks {
		own, onPool := tasks[i].servingCores()
		held += own
		pooled = pooled || onPool
	}
	if pooled {
		held += sharedPoolCores
	}
	return held
}
