//! Binding a variant onto its task's signature: which of its tensors is which of the
//! task's, and whether their types and shapes agree.

use std::collections::BTreeMap;

use super::{SignatureMismatch, TensorMaps, describe};
use crate::backend::{ModelMetadata, TensorSpec};

/// How one variant serves its task's signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// What requests to the variant and its answers look like: the task's names and
    /// order, with the dimensions the task leaves open narrowed to the variant's.
    pub presented: ModelMetadata,
    /// For each task input, the index of the variant input it feeds.
    pub(crate) inputs: Vec<usize>,
    /// For each task output, the variant output it comes from and whether its shape
    /// differs from the task's by size-1 dimensions.
    pub(crate) outputs: Vec<(usize, bool)>,
    /// The variant takes one row per run (its batch dimension is fixed at 1) where the
    /// task's is open: a batch runs row by row.
    pub(crate) one_row: bool,
}

impl Binding {
    /// Whether the variant already is the task's signature, so requests need no mapping.
    pub fn is_identity(&self, model: &ModelMetadata) -> bool {
        self.presented == *model
            && !self.one_row
            && self.inputs.iter().enumerate().all(|(i, &m)| i == m)
            && self.outputs.iter().enumerate().all(|(i, &(m, reshape))| i == m && !reshape)
    }
}

/// Binds variant `variant` of task `task` (`model` is what its session takes and gives)
/// onto the task's `signature`, with its name maps.
pub fn bind(
    task: &str,
    variant: &str,
    signature: &ModelMetadata,
    model: &ModelMetadata,
    maps: &TensorMaps,
) -> Result<Binding, Box<SignatureMismatch>> {
    let fail = |tensor: String, reason: String| {
        Box::new(SignatureMismatch {
            task: task.to_string(),
            variant: variant.to_string(),
            tensor,
            reason,
            task_signature: describe(signature),
            variant_signature: describe(model),
        })
    };
    let inputs = pair("input", &signature.inputs, &model.inputs, &maps.input_map).map_err(|(t, r)| fail(t, r))?;
    if let Some(unfed) = (0..model.inputs.len()).find(|m| !inputs.contains(m)) {
        let name = &model.inputs[unfed].name;
        return Err(fail(format!("input `{name}`"), "the variant needs it and the task does not give it".into()));
    }
    let mut presented = ModelMetadata { inputs: Vec::new(), outputs: Vec::new() };
    for (task_spec, &m) in signature.inputs.iter().zip(&inputs) {
        let shape = fit("input", task_spec, &model.inputs[m], false).map_err(|(t, r)| fail(t, r))?;
        presented.inputs.push(TensorSpec::new(task_spec.name.clone(), task_spec.dtype, shape));
    }
    let outputs = pair("output", &signature.outputs, &model.outputs, &maps.output_map).map_err(|(t, r)| fail(t, r))?;
    let mut routes = Vec::with_capacity(outputs.len());
    for (task_spec, &m) in signature.outputs.iter().zip(&outputs) {
        let model_spec = &model.outputs[m];
        let reshape = task_spec.shape.len() != model_spec.shape.len();
        let shape = fit("output", task_spec, model_spec, reshape).map_err(|(t, r)| fail(t, r))?;
        presented.outputs.push(TensorSpec::new(task_spec.name.clone(), task_spec.dtype, shape));
        routes.push((m, reshape));
    }
    let batch = |specs: &[TensorSpec]| specs.iter().map(|s| s.shape.first().copied()).collect::<Vec<_>>();
    let one_row = [batch(&model.inputs), batch(&model.outputs)].iter().flatten().all(|&d| d == Some(Some(1)))
        && [batch(&signature.inputs), batch(&signature.outputs)].iter().flatten().all(|&d| d == Some(None));
    if one_row {
        for spec in presented.inputs.iter_mut().chain(presented.outputs.iter_mut()) {
            spec.shape[0] = None;
        }
    }
    Ok(Binding { presented, inputs, outputs: routes, one_row })
}

/// For each task tensor, the index of the variant's tensor that is it: named in the
/// map, else of the same name, else at the same position where both have as many.
fn pair(
    kind: &str,
    task: &[TensorSpec],
    model: &[TensorSpec],
    map: &BTreeMap<String, String>,
) -> Result<Vec<usize>, (String, String)> {
    let mut chosen: Vec<Option<usize>> = vec![None; task.len()];
    for (from, to) in map {
        let m = model.iter().position(|s| &s.name == from).ok_or_else(|| {
            (format!("{kind} `{from}`"), format!("named in {kind}_map, but the variant has no such {kind}"))
        })?;
        let t = task.iter().position(|s| &s.name == to).ok_or_else(|| {
            (format!("{kind} `{to}`"), format!("named in {kind}_map, but the task has no such {kind}"))
        })?;
        if chosen[t].replace(m).is_some() {
            return Err((format!("{kind} `{to}`"), format!("{kind}_map maps two of the variant's {kind}s onto it")));
        }
    }
    let taken = |chosen: &[Option<usize>], m: usize| chosen.contains(&Some(m)) || map.contains_key(&model[m].name);
    for t in 0..task.len() {
        if chosen[t].is_none()
            && let Some(m) = model.iter().position(|s| s.name == task[t].name)
            && !taken(&chosen, m)
        {
            chosen[t] = Some(m);
        }
    }
    if task.len() == model.len() {
        for t in 0..task.len() {
            if chosen[t].is_none() && !taken(&chosen, t) {
                chosen[t] = Some(t);
            }
        }
    }
    chosen
        .iter()
        .zip(task)
        .map(|(m, spec)| {
            m.ok_or_else(|| {
                let reason = format!("the variant has no {kind} for it; name the variant's in {kind}_map");
                (format!("{kind} `{}`", spec.name), reason)
            })
        })
        .collect()
}

/// The shape the variant presents for `task`'s tensor: the task's dimensions, those it
/// leaves open narrowed to the variant's. With `squeeze`, the two may differ by
/// dimensions of size 1 (after the batch dimension).
fn fit(
    kind: &str,
    task: &TensorSpec,
    model: &TensorSpec,
    squeeze: bool,
) -> Result<Vec<Option<usize>>, (String, String)> {
    let tensor = || format!("{kind} `{}`", task.name);
    if task.dtype != model.dtype {
        return Err((tensor(), format!("{} in the task, {} in the variant", task.dtype, model.dtype)));
    }
    let kept = |shape: &[Option<usize>]| -> Vec<Option<usize>> {
        let rest = shape.iter().skip(1).filter(|d| !squeeze || **d != Some(1));
        shape.first().into_iter().chain(rest).copied().collect()
    };
    let (want, have) = (kept(&task.shape), kept(&model.shape));
    if want.len() != have.len() {
        let how = if squeeze { " even without dimensions of size 1" } else { "" };
        return Err((
            tensor(),
            format!("rank {} in the task, {} in the variant{how}", task.shape.len(), model.shape.len()),
        ));
    }
    for (i, (w, h)) in want.iter().zip(&have).enumerate() {
        if let (Some(w), Some(h)) = (w, h)
            && w != h
            && i > 0
        {
            let shapes = format!("{} in the task, {} in the variant", task.shape_display(), model.shape_display());
            return Err((tensor(), format!("sizes differ: {shapes}")));
        }
    }
    if squeeze {
        // The answer takes the task's shape; only the batch dimension is the variant's.
        let mut shape = task.shape.clone();
        if let (Some(first), Some(&batch)) = (shape.first_mut(), model.shape.first()) {
            *first = first.or(batch);
        }
        return Ok(shape);
    }
    Ok(want.iter().zip(&have).map(|(w, h)| w.or(*h)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn spec(name: &str, shape: &[Option<usize>]) -> TensorSpec {
        TensorSpec::new(name, DType::F32, shape.to_vec())
    }

    const N: Option<usize> = None;

    fn classifier(input: &str, output: &str, out_shape: &[Option<usize>]) -> ModelMetadata {
        ModelMetadata {
            inputs: vec![spec(input, &[N, Some(3), Some(224), Some(224)])],
            outputs: vec![spec(output, &[&[N], out_shape].concat())],
        }
    }

    fn task() -> ModelMetadata {
        classifier("image", "logits", &[Some(1000)])
    }

    #[test]
    fn a_variant_with_other_names_and_size_one_dimensions_is_bound_by_position() {
        let model = classifier("gpu_0/data_0", "softmaxout_1", &[Some(1000), Some(1), Some(1)]);
        let binding = bind("t", "v", &task(), &model, &TensorMaps::default()).unwrap();
        assert_eq!(binding.presented, task());
        assert_eq!((binding.inputs.clone(), binding.outputs.clone()), (vec![0], vec![(0, true)]));
        assert!(!binding.is_identity(&model));
        assert!(bind("t", "v", &task(), &task(), &TensorMaps::default()).unwrap().is_identity(&task()));
    }

    #[test]
    fn maps_pick_tensors_where_position_cannot() {
        let signature = ModelMetadata {
            inputs: vec![spec("a", &[N, Some(2)]), spec("b", &[N, Some(3)])],
            outputs: vec![spec("y", &[N, Some(1)])],
        };
        let model = ModelMetadata {
            inputs: vec![spec("second", &[N, Some(3)]), spec("first", &[N, Some(2)])],
            outputs: vec![spec("extra", &[N, Some(5)]), spec("out", &[N])],
        };
        let mut maps = TensorMaps::default();
        let unmapped = bind("t", "v", &signature, &model, &maps).unwrap_err();
        assert!(unmapped.reason.contains("sizes differ"), "{unmapped}");
        maps.input_map = [("first".into(), "a".into()), ("second".into(), "b".into())].into();
        let no_output = bind("t", "v", &signature, &model, &maps).unwrap_err();
        assert_eq!(no_output.tensor, "output `y`");
        maps.output_map = [("out".into(), "y".into())].into();
        let binding = bind("t", "v", &signature, &model, &maps).unwrap();
        assert_eq!(binding.inputs, vec![1, 0]);
        assert_eq!(binding.outputs, vec![(1, true)]);
    }

    #[test]
    fn what_does_not_fit_is_refused_naming_the_tensor_and_both_signatures() {
        let wrong_size = classifier("data", "prob", &[Some(10)]);
        let err = bind("classify", "small", &task(), &wrong_size, &TensorMaps::default()).unwrap_err();
        assert_eq!((err.variant.as_str(), err.tensor.as_str()), ("small", "output `logits`"));
        let text = err.to_string();
        assert!(text.contains("[N, 1000]") && text.contains("[N, 10]") && text.contains("task `classify`"), "{text}");
        let mut wrong_type = task();
        wrong_type.inputs[0].dtype = DType::U8;
        let err = bind("classify", "q", &task(), &wrong_type, &TensorMaps::default()).unwrap_err();
        assert!(err.reason.contains("f32 in the task, u8 in the variant"), "{err}");
        let mut two_inputs = task();
        two_inputs.inputs.push(spec("mask", &[N, Some(224)]));
        let err = bind("classify", "m", &task(), &two_inputs, &TensorMaps::default()).unwrap_err();
        assert_eq!(err.tensor, "input `mask`");
        let bad_map = TensorMaps { input_map: [("nope".into(), "image".into())].into(), ..TensorMaps::default() };
        assert!(bind("classify", "v", &task(), &task(), &bad_map).unwrap_err().reason.contains("input_map"));
    }

    #[test]
    fn open_task_dimensions_take_the_variants_and_a_fixed_batch_of_one_stays() {
        let signature = ModelMetadata {
            inputs: vec![spec("image", &[N, Some(3), N, N])],
            outputs: vec![spec("logits", &[N, Some(1000)])],
        };
        let mut fixed = classifier("x", "y", &[Some(1000)]);
        fixed.inputs[0].shape[0] = Some(1);
        fixed.outputs[0].shape[0] = Some(1);
        let binding = bind("t", "v", &signature, &fixed, &TensorMaps::default()).unwrap();
        assert_eq!(binding.presented.inputs[0].shape, vec![None, Some(3), Some(224), Some(224)]);
        assert!(binding.one_row && binding.presented.dynamic_batch(), "requests of any rows, run one by one");
    }
}
